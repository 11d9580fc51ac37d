// The synchronous routes' request bodies in the OpenAPI document: each is its endpoint's real schema (not a free-form
// object, which Swagger UI fills with `additionalProp1`), each example passes both the document's schema and the
// route's own check, a field the route refuses the document refuses too, and POST /v1/batches offers first the
// example that runs as it is. tests/e2e/browser-docs.sys.test.ts runs every example from Swagger UI.
import { Ajv2020 } from "ajv/dist/2020.js";
import { describe, expect, it } from "vitest";
import { buildOpenApiDocument } from "../../api/openapi.js";
import { InlineBatchRequest } from "../../api/schemas/requests.js";
import { ENDPOINTS } from "../../openai/backend.js";
import { parse } from "../../sync/request.js";

const doc = buildOpenApiDocument({ model: "the-model" }) as any;
const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addSchema({ $id: "doc", components: doc.components });
/** The document's schema of a JSON body, its `$ref`s resolved against the document's components. */
const validator = (schema: object) => ajv.compile(JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"doc#/components/')));
const bodyOf = (route: string) => doc.paths[route].post.requestBody.content["application/json"];
const named = (route: string) => {
  const ref: string = bodyOf(route).schema.$ref;
  return doc.components.schemas[ref.slice(ref.lastIndexOf("/") + 1)];
};

const REQUIRED: Record<string, string[]> = { "/v1/messages": ["model", "max_tokens", "messages"], "/v1/chat/completions": ["messages"] };

describe("the synchronous routes' bodies in the OpenAPI document", () => {
  it.each(ENDPOINTS)("documents %s with its endpoint's fields, named, not a free-form object", (endpoint) => {
    expect(bodyOf(endpoint).schema.$ref).toMatch(/^#\/components\/schemas\/\w+Request$/);
    const schema = named(endpoint);
    expect(schema.type).toBe("object");
    expect(schema.additionalProperties).toBe(false);
    expect(Object.keys(schema.properties)).toContain("model");
    for (const field of REQUIRED[endpoint] ?? []) expect(schema.required).toContain(field);
  });

  it.each(ENDPOINTS)("gives %s an example that both the document and the route accept, naming the deployment's model", (endpoint) => {
    const example = named(endpoint).example;
    expect(example.model).toBe("the-model");
    const check = validator(bodyOf(endpoint).schema);
    expect(check(example), JSON.stringify(check.errors)).toBe(true);
    expect(() => parse(endpoint, example, false)).not.toThrow();
  });

  it("documents streaming where the route serves it, and refuses what the route refuses", () => {
    for (const endpoint of ["/v1/chat/completions", "/v1/completions"] as const) {
      const check = validator(bodyOf(endpoint).schema);
      const streamed = { ...named(endpoint).example, stream: true, stream_options: { include_usage: true } };
      expect(check(streamed), JSON.stringify(check.errors)).toBe(true);
      expect(() => parse(endpoint, streamed, true)).not.toThrow();
      const typo = { ...named(endpoint).example, max_tokenz: 5 };
      expect(check(typo)).toBe(false);
      expect(() => parse(endpoint, typo, false)).toThrow(/max_tokenz/);
    }
    expect(named("/v1/embeddings").properties.stream).toBeUndefined();
  });

  it("offers first, for POST /v1/batches, the inline example, which runs as it is", () => {
    const examples = bodyOf("/v1/batches").examples;
    const [first] = Object.values<{ value: unknown }>(examples);
    expect(Object.keys(examples)[0]).toBe("inline");
    expect(InlineBatchRequest.safeParse(first.value).success).toBe(true);
    expect(first.value).toMatchObject({ model: "the-model" });
  });
});
