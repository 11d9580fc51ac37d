// A body that passes its check comes out of it as it went in: a dataset job's lines, checked once as they are made,
// are looked up in the result cache as they were written (RunBatchOptions.bodiesChecked), and the answers were
// stored under the checked bodies. A schema that transformed, defaulted or stripped a field would part the two keys.

import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { ENDPOINTS, type Endpoint } from "../../openai/backend.js";
import { bodySchemaFor, parseRequest } from "../../parse/request.js";

interface Def {
  type: string;
  shape?: Record<string, z.ZodType>;
  catchall?: z.ZodType;
  element?: z.ZodType;
  options?: z.ZodType[];
  innerType?: z.ZodType;
  keyType?: z.ZodType;
  valueType?: z.ZodType;
  left?: z.ZodType;
  right?: z.ZodType;
  items?: z.ZodType[];
  rest?: z.ZodType | null;
  getter?: () => z.ZodType;
  checks?: Array<{ _zod: { def: { check: string } } }>;
}

const defOf = (schema: z.ZodType) => (schema as unknown as { _zod: { def: Def } })._zod.def;

/** Where in the schema a valid value would be changed by its parse: a path and what changes it; none: nowhere. */
function changes(schema: z.ZodType, at: string, seen: Set<z.ZodType>): string[] {
  if (seen.has(schema)) return [];
  seen.add(schema);
  const def = defOf(schema);
  const found: string[] = [];
  if (["transform", "pipe", "default", "prefault", "catch", "custom"].includes(def.type)) found.push(`${at}: ${def.type}`);
  if (def.checks?.some((c) => c._zod.def.check === "overwrite")) found.push(`${at}: a check that rewrites the value`);
  // An object without a catchall drops the keys it does not know; a strict one refuses them, a loose one keeps them.
  if (def.type === "object" && !def.catchall) found.push(`${at}: an object that strips unknown keys`);
  const inner: Array<[string, z.ZodType | null | undefined]> = [
    ...Object.entries(def.shape ?? {}).map(([k, s]): [string, z.ZodType] => [`${at}.${k}`, s]),
    [`${at}.*`, def.catchall],
    [`${at}[]`, def.element],
    ...(def.options ?? []).map((s, i): [string, z.ZodType] => [`${at}|${i}`, s]),
    [at, def.innerType],
    [`${at}{key}`, def.keyType],
    [`${at}{}`, def.valueType],
    [`${at}&`, def.left],
    [`${at}&`, def.right],
    ...(def.items ?? []).map((s, i): [string, z.ZodType] => [`${at}[${i}]`, s]),
    [`${at}[...]`, def.rest],
    [at, def.type === "lazy" ? def.getter?.() : undefined],
  ];
  for (const [where, s] of inner) if (s) found.push(...changes(s, where, seen));
  return found;
}

const SERVED: Endpoint[] = [...ENDPOINTS, "/v1/messages"];

/** A valid body of each endpoint, with nested objects, arrays and nulls where its schema has them. */
const BODIES: Partial<Record<Endpoint, Record<string, unknown>>> = {
  "/v1/chat/completions": {
    model: "m",
    messages: [
      { role: "system", content: "Be brief." },
      { role: "user", content: [{ type: "text", text: "Hi" }] },
    ],
    temperature: 0,
    max_tokens: 8,
    stop: ["\n"],
    response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object", properties: {} } } },
    logit_bias: null,
  },
  "/v1/completions": { model: "m", prompt: "Label this ticket: late", max_tokens: 4, temperature: 0, seed: 7, echo: false },
  "/v1/embeddings": { model: "m", input: ["a", "b"], encoding_format: "float" },
  "/v1/responses": { model: "m", input: [{ role: "user", content: "Hi" }], temperature: 0, max_output_tokens: 16 },
  "/v1/rerank": { model: "m", query: "q", documents: ["a", "b"], top_n: 1 },
  "/v1/score": { model: "m", text_1: "a", text_2: ["b", "c"] },
  "/v1/messages": { model: "m", max_tokens: 8, system: "Be brief.", messages: [{ role: "user", content: "Hi" }], temperature: 0 },
};

describe("a checked body is the body as written", () => {
  it("no endpoint's schema transforms, defaults, rewrites or strips a field", () => {
    for (const endpoint of SERVED) expect(changes(bodySchemaFor(endpoint), "body", new Set()), endpoint).toEqual([]);
  });

  it("a valid body of each endpoint comes out of its check equal to what went in", () => {
    for (const endpoint of SERVED) {
      const body = BODIES[endpoint];
      expect(body, `a body for ${endpoint}`).toBeDefined();
      expect(parseRequest(endpoint, structuredClone(body)).body, endpoint).toEqual(body);
    }
  });

  it("finds what would change a body: a default, a transform, a stripping object, a rewriting check", async () => {
    const { z } = await import("zod");
    const schema = z.strictObject({
      a: z.string().default("x"),
      b: z.string().transform((s) => s),
      c: z.object({}),
      d: z.array(z.string().trim()),
      e: z.looseObject({ f: z.number() }),
    });
    expect(changes(schema, "body", new Set())).toEqual([
      "body.a: default",
      "body.b: pipe",
      "body.c: an object that strips unknown keys",
      "body.d[]: a check that rewrites the value",
    ]);
  });
});
