// The one bound on how deep a client's JSON nests: measured without recursion at any depth, refused at 65 levels
// and not at 64, naming the top field; and the walks that ran before a body is parsed leave a deep one alone.
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { withDefaults } from "../../domain/default-params.js";
import { MAX_JSON_DEPTH, tooDeepAt } from "../../openai/json-depth.js";
import { parseRequest } from "../../openai/parse.js";
import { validateBatchFile } from "../../pipeline/validate.js";

/** `{type: object, properties: {a: …}}` around a string schema, `levels` objects deep (the schema's own levels). */
function schemaNested(levels: number): Record<string, unknown> {
  let s: Record<string, unknown> = { type: "string" };
  // Each level adds two objects: the schema and its `properties`.
  for (let i = 0; i < levels; i++) s = { type: "object", properties: { a: s } };
  return s;
}
/** An array holding an array… `levels` deep (the outermost is level 1). */
function arraysNested(levels: number): unknown {
  let v: unknown = [];
  for (let i = 1; i < levels; i++) v = [v];
  return v;
}
const chat = (extra: Record<string, unknown>) => ({ model: "m", messages: [{ role: "user", content: "hi" }], ...extra });

describe("the JSON nesting bound", () => {
  it(`takes ${MAX_JSON_DEPTH} levels and refuses ${MAX_JSON_DEPTH + 1}, the body itself being the first`, () => {
    expect(tooDeepAt(arraysNested(MAX_JSON_DEPTH))).toBeNull();
    expect(tooDeepAt(arraysNested(MAX_JSON_DEPTH + 1))).toHaveLength(MAX_JSON_DEPTH);
    expect(tooDeepAt({ a: arraysNested(MAX_JSON_DEPTH - 1) })).toBeNull();
    expect(tooDeepAt({ a: arraysNested(MAX_JSON_DEPTH) })?.[0]).toBe("a");
  });

  it("measures a body nested 200,000 deep without overflowing the stack", () => {
    expect(tooDeepAt(arraysNested(200_000))).toHaveLength(MAX_JSON_DEPTH);
  });

  it("refuses a request nested too deep as a 400 naming its top field, with no internal words, at any depth", () => {
    for (const levels of [40, 1_500, 3_000, 20_000]) {
      const body = chat({ response_format: { type: "json_schema", json_schema: { name: "x", schema: schemaNested(levels) } } });
      let err: any;
      try {
        parseRequest("/v1/chat/completions", body);
      } catch (e) {
        err = e;
      }
      expect(err, `${levels} levels`).toMatchObject({ code: "nesting_too_deep", param: "response_format", retryable: false });
      expect(err.message).toContain(`more than ${MAX_JSON_DEPTH} levels deep (at response_format.json_schema.schema.properties.a`);
      expect(err.message).not.toMatch(/stack|RangeError/i);
    }
    const tools = [{ type: "function", function: { name: "f", parameters: schemaNested(3_000) } }];
    expect(() => parseRequest("/v1/chat/completions", chat({ tools }))).toThrow(expect.objectContaining({ param: "tools" }));
    const messages = [{ role: "user", content: arraysNested(3_000) }];
    expect(() => parseRequest("/v1/chat/completions", { model: "m", messages })).toThrow(
      expect.objectContaining({ code: "nesting_too_deep", param: "messages" }),
    );
    // Within the bound the schema is the schema's business (a schema 20 levels deep parses).
    expect(() =>
      parseRequest(
        "/v1/chat/completions",
        chat({ response_format: { type: "json_schema", json_schema: { name: "x", schema: schemaNested(20) } } }),
      ),
    ).not.toThrow();
  });

  it("lets a deep line through validation and the batch's defaults unwalked, for its own 400 when it runs", async () => {
    // Written as text: JSON.stringify itself overflows on a value this deep.
    const schema = `${'{"type":"object","properties":{"a":'.repeat(3_000)}{"type":"string"}${"}}".repeat(3_000)}`;
    const tools = `[{"type":"function","function":{"name":"f","parameters":${schema}}}]`;
    const deep = `{"custom_id":"deep","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[],"tools":${tools}}}`;
    const ok = JSON.stringify({ custom_id: "ok", method: "POST", url: "/v1/chat/completions", body: chat({}) });
    const v = await validateBatchFile(Readable.from([Buffer.from(`${deep}\n${ok}\n`)]), "/v1/chat/completions", {
      maxRequests: 10,
      maxLineBytes: 1 << 20,
    });
    expect(v).toMatchObject({ ok: true, total: 2, errorCount: 0 });
    expect(withDefaults(deep, { temperature: 0 })).toBe(deep);
    expect(JSON.parse(withDefaults(ok, { temperature: 0 })).body.temperature).toBe(0);
  });
});
