// An OpenAI response_format JSON schema, checked against what node-llama-cpp's grammar generator can
// enforce, and turned into its GbnfJsonSchema. A construct the grammar cannot express is refused with the
// path of the construct: an answer that merely "tends to" follow the schema would be wrong work marked done.
import type { GbnfJsonSchema } from "node-llama-cpp";
import { unsupportedValue } from "../../openai/errors.js";

/** Annotations that constrain nothing, so a grammar honours them by ignoring them. */
const ANNOTATIONS = new Set([
  "title",
  "description",
  "$schema",
  "$id",
  "$comment",
  "default",
  "examples",
  "deprecated",
  "readOnly",
  "writeOnly",
]);
const IMMUTABLE = new Set(["string", "number", "integer", "boolean", "null"]);
const FORMATS = new Set(["date-time", "time", "date"]);
/** Keys each kind may carry besides the annotations. */
const ALLOWED: Record<string, Set<string>> = {
  object: new Set(["type", "properties", "required", "additionalProperties", "minProperties", "maxProperties", "$defs"]),
  array: new Set(["type", "items", "prefixItems", "minItems", "maxItems", "$defs"]),
  string: new Set(["type", "minLength", "maxLength", "format"]),
  basic: new Set(["type"]),
  // A type beside const or enum adds nothing the values do not already fix.
  const: new Set(["const", "type"]),
  enum: new Set(["enum", "type"]),
  oneOf: new Set(["oneOf", "anyOf", "$defs"]),
  ref: new Set(["$ref", "$defs"]),
};

type Json = Record<string, unknown>;

/** Throws an unsupported_value RequestError on `param` naming the first construct the grammar cannot enforce. */
export function toGrammarSchema(schema: unknown, param: string): GbnfJsonSchema {
  return convert(schema, "#", param) as GbnfJsonSchema;
}

function convert(node: unknown, at: string, param: string): Json {
  const refuse = (what: string) =>
    unsupportedValue(param, `The JSON schema construct ${what} at '${at}' cannot be enforced by this deployment's constrained decoding.`);
  if (node === true || (isObject(node) && Object.keys(node).every((k) => ANNOTATIONS.has(k)))) {
    throw refuse("'any value' (an empty schema)");
  }
  if (!isObject(node)) throw refuse(`'${JSON.stringify(node)}'`);
  const kind = kindOf(node);
  if (!kind) throw refuse(`'${Object.keys(node).join(", ")}'`);
  for (const key of Object.keys(node)) {
    if (!ANNOTATIONS.has(key) && !ALLOWED[kind].has(key)) throw refuse(`'${key}'`);
  }
  const out: Json = {};
  if (typeof node.description === "string") out.description = node.description;
  const child = (value: unknown, path: string) => convert(value, `${at}/${path}`, param);
  if (isObject(node.$defs)) out.$defs = mapValues(node.$defs, (v, k) => child(v, `$defs/${k}`));

  switch (kind) {
    case "const":
    case "enum":
      for (const v of kind === "const" ? [node.const] : (node.enum as unknown[])) {
        if (v !== null && typeof v === "object") throw refuse(`'${kind}' with an object or array value`);
      }
      out[kind] = node[kind];
      return out;
    case "oneOf": {
      // anyOf: a grammar that produces exactly one matching branch satisfies anyOf as well.
      const key = node.oneOf !== undefined ? "oneOf" : "anyOf";
      if (node.oneOf !== undefined && node.anyOf !== undefined) throw refuse("'oneOf' together with 'anyOf'");
      if (!Array.isArray(node[key]) || (node[key] as unknown[]).length === 0) throw refuse(`an empty '${key}'`);
      out.oneOf = (node[key] as unknown[]).map((v, i) => child(v, `${key}/${i}`));
      return out;
    }
    case "ref":
      if (typeof node.$ref !== "string" || !/^#\/\$defs\/[^/]+$/.test(node.$ref)) throw refuse(`'$ref' other than '#/$defs/<name>'`);
      out.$ref = node.$ref;
      return out;
    case "string":
      if (node.format !== undefined && !FORMATS.has(node.format as string)) throw refuse(`'format: ${String(node.format)}'`);
      return copy(node, out, ["type", "minLength", "maxLength", "format"]);
    case "basic":
      return copy(node, out, ["type"]);
    case "object":
      if (isObject(node.properties)) out.properties = mapValues(node.properties, (v, k) => child(v, `properties/${k}`));
      if (node.additionalProperties !== undefined && typeof node.additionalProperties !== "boolean") {
        out.additionalProperties = child(node.additionalProperties, "additionalProperties");
      } else if (node.additionalProperties === true) {
        out.additionalProperties = true;
      }
      return copy(node, out, ["type", "required", "minProperties", "maxProperties"]);
    default:
      if (node.items !== undefined) out.items = child(node.items, "items");
      if (Array.isArray(node.prefixItems)) out.prefixItems = node.prefixItems.map((v, i) => child(v, `prefixItems/${i}`));
      return copy(node, out, ["type", "minItems", "maxItems"]);
  }
}

function kindOf(node: Json): string | null {
  if ("const" in node) return "const";
  if ("enum" in node) return Array.isArray(node.enum) && node.enum.length > 0 ? "enum" : null;
  if ("oneOf" in node || "anyOf" in node) return "oneOf";
  if ("$ref" in node) return "ref";
  const t = node.type;
  if (t === "object" || t === "array") return t;
  if (t === "string") return "string";
  if (typeof t === "string" && IMMUTABLE.has(t)) return "basic";
  if (Array.isArray(t) && t.length > 0 && t.every((x) => typeof x === "string" && IMMUTABLE.has(x))) return "basic";
  return null;
}

const isObject = (v: unknown): v is Json => v !== null && typeof v === "object" && !Array.isArray(v);

function mapValues(o: Json, f: (v: unknown, k: string) => Json): Json {
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, f(v, k)]));
}

function copy(from: Json, to: Json, keys: string[]): Json {
  for (const k of keys) if (from[k] !== undefined) to[k] = from[k];
  return to;
}
