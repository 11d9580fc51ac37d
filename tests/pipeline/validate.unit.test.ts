import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import type { Endpoint, ValidationLimits } from "../../pipeline/types.js";
import { validateBatchFile } from "../../pipeline/validate.js";
import { jsonl, scratchDir } from "../helpers/scratch.js";

const scratch = scratchDir("validate");
const limits: ValidationLimits = { maxRequests: 50_000, maxLineBytes: 1024 * 1024 };

const chatLine = (id: string, extra: Record<string, unknown> = {}) => ({
  custom_id: id,
  method: "POST",
  url: "/v1/chat/completions",
  body: { model: "m", messages: [{ role: "user", content: "hi" }], ...extra },
});

/** Validates the content from a file, and checks that the same bytes streamed in 7-byte chunks read the same. */
async function validate(content: string, endpoint: Endpoint = "/v1/chat/completions", lim: Partial<ValidationLimits> = {}) {
  const fromFile = await validateBatchFile(await scratch.write(content), endpoint, { ...limits, ...lim });
  const bytes = Buffer.from(content);
  const chunks = Array.from({ length: Math.ceil(bytes.length / 7) }, (_, i) => bytes.subarray(i * 7, i * 7 + 7));
  expect(await validateBatchFile(Readable.from(chunks), endpoint, { ...limits, ...lim })).toEqual(fromFile);
  return fromFile;
}

describe("validateBatchFile", () => {
  it("accepts a good file and reports its total and model", async () => {
    const r = await validate(jsonl([chatLine("a"), chatLine("b")]));
    // Each line: "hi" (1 token at 4 characters a token), a message's 4, and a chat's 1,024 with no max_tokens.
    expect(r).toEqual({
      ok: true,
      total: 2,
      errors: [],
      errorCount: 0,
      model: "m",
      modelLine: 1,
      models: [{ model: "m", line: 1 }],
      enqueuedTokens: { m: 2058 },
    });
  });

  it("accepts all three endpoints' bodies, CRLF and a missing final newline", async () => {
    const comp = { custom_id: "c", method: "POST", url: "/v1/completions", body: { model: "m", prompt: ["x"], max_tokens: 5, stop: "\n" } };
    const emb = {
      custom_id: "e",
      method: "POST",
      url: "/v1/embeddings",
      body: { model: "m", input: ["a", "b"], encoding_format: "base64" },
    };
    expect((await validate(`${JSON.stringify(comp)}\r\n${JSON.stringify({ ...comp, custom_id: "d" })}`, "/v1/completions")).ok).toBe(true);
    expect((await validate(JSON.stringify(emb), "/v1/embeddings")).ok).toBe(true);
  });

  it("ignores trailing blank lines but reports blank lines in the middle", async () => {
    expect((await validate(`${jsonl([chatLine("a")])}\n\n  \n`)).ok).toBe(true);
    const r = await validate(`${jsonl([chatLine("a")])}\n\n${jsonl([chatLine("b")])}`);
    expect(r.errors.map((e) => [e.code, e.line])).toEqual([
      ["invalid_json_line", 2],
      ["invalid_json_line", 3],
    ]);
    expect(r.total).toBe(2);
  });

  it("reports each kind of bad line with its code and line number", async () => {
    const content = [
      "{not json",
      "[1,2]",
      JSON.stringify({ method: "POST", url: "/v1/chat/completions", body: {} }),
      JSON.stringify({ ...chatLine("m1"), method: "GET" }),
      JSON.stringify({ ...chatLine("u1"), url: "/v1/images" }),
      JSON.stringify({ ...chatLine("u2"), url: "/v1/embeddings" }),
      JSON.stringify(chatLine("ok")),
      JSON.stringify(chatLine("ok")),
      JSON.stringify(chatLine("t", { temperature: 5 })),
      JSON.stringify(chatLine("n", { n: 3 })),
      JSON.stringify({ ...chatLine("nb"), body: "text" }),
      JSON.stringify({ custom_id: "nm", method: "POST", url: "/v1/chat/completions", body: { model: "m" } }),
      JSON.stringify({ ...chatLine(""), custom_id: "" }),
      JSON.stringify(chatLine("other", { model: "z" })),
    ].join("\n");
    const r = await validate(content);
    expect(r.ok).toBe(false);
    expect(r.total).toBe(14);
    // Lines 9, 10 and 12 have bad bodies: those fail only their own request when the batch runs, as on OpenAI.
    expect(r.errors.map((e) => [e.line, e.code, e.param ?? null])).toEqual([
      [1, "invalid_json_line", null],
      [2, "invalid_json_line", null],
      [3, "missing_required_parameter", "custom_id"],
      [4, "invalid_method", "method"],
      [5, "invalid_url", "url"],
      [6, "mismatched_url", "url"],
      [8, "duplicate_custom_id", "custom_id"],
      [11, "invalid_body", "body"],
      [13, "invalid_custom_id", "custom_id"],
      [14, "mismatched_model", "body.model"],
    ]);
    expect(r.errors[5].message).toContain("/v1/chat/completions");
  });

  it("leaves request bodies to the run: a bad body is no fault of the file", async () => {
    const r = await validate(
      jsonl([
        chatLine("a", { messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }] }),
        chatLine("b", { stop: ["1", "2", "3", "4", "5"] }),
        chatLine("c", { unknown_field: 1 }),
      ]),
    );
    expect(r).toMatchObject({ ok: true, total: 3, errorCount: 0 });
  });

  it("reports an empty file, and a file of blank lines, as empty_file", async () => {
    expect((await validate("")).errors).toEqual([{ code: "empty_file", message: expect.any(String), line: null }]);
    expect((await validate("\n\n")).errors.map((e) => e.code)).toEqual(["empty_file"]);
  });

  it("enforces maxRequests once, and keeps counting", async () => {
    const r = await validate(jsonl(["a", "b", "c", "d"].map((id) => chatLine(id))), undefined, { maxRequests: 2 });
    expect(r.total).toBe(4);
    expect(r.errors).toEqual([{ code: "too_many_requests", message: expect.stringContaining("at most 2"), line: 3 }]);
  });

  it("reports overlong lines without reading them whole", async () => {
    const r = await validate(jsonl([chatLine("a"), chatLine("b", { pad: "x".repeat(5000) }), chatLine("c")]), undefined, {
      maxLineBytes: 1000,
    });
    expect(r.errors.map((e) => [e.code, e.line])).toEqual([["line_too_long", 2]]);
    expect(r.total).toBe(3);
  });

  it("lists at most maxErrors errors but counts them all", async () => {
    const r = await validate("x\n".repeat(250), undefined, { maxErrors: 10 });
    expect(r.errors).toHaveLength(10);
    expect(r.errorCount).toBe(250);
    expect(r.total).toBe(250);
    expect((await validate("x\n".repeat(150))).errors).toHaveLength(100);
  });

  it("reports a missing file as an error, not a crash", async () => {
    const r = await validateBatchFile(await scratch.file(), "/v1/chat/completions", limits);
    expect(r.ok).toBe(false);
    expect(r.errors[0]).toMatchObject({ code: "unreadable_file", line: null });
  });

  it("validates 50,000 lines in one streaming pass", async () => {
    const lines = Array.from({ length: 50_000 }, (_, i) =>
      JSON.stringify({
        custom_id: `request-${i}`,
        method: "POST",
        url: "/v1/chat/completions",
        body: {
          model: "m",
          messages: [
            { role: "system", content: "Be brief." },
            { role: "user", content: `Question number ${i}?` },
          ],
          max_tokens: 50,
        },
      }),
    );
    const p = await scratch.write(`${lines.join("\n")}\n`);
    const r = await validateBatchFile(p, "/v1/chat/completions", limits);
    expect(r).toMatchObject({ ok: true, total: 50_000, errorCount: 0 });
  });
});
