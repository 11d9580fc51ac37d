import { describe, expect, it } from "vitest";
import { bodySchemaFor } from "../../parse/request.js";
import { BatchLineSchema } from "../../pipeline/batch-line.js";
import { InlineBatchBodySchema, InlineBatchError, inlineToLines } from "../../pipeline/inline.js";

const parse = (v: unknown) => InlineBatchBodySchema.parse(v);
const issue = (v: unknown) => {
  const r = InlineBatchBodySchema.safeParse(v);
  if (r.success) throw new Error("expected a failure");
  return r.error.issues[0];
};

describe("inline batches", () => {
  it("turns the inline form's body into /v1/completions lines", () => {
    const body = parse({
      model: "Qwen/Qwen2.5-0.5B-Instruct",
      input: [{ prompt: "What is 2+2?" }, { prompt: "Hello world" }],
      max_tokens: 50,
    });
    const { endpoint, model, lines } = inlineToLines(body);
    expect(endpoint).toBe("/v1/completions");
    expect(model).toBe("Qwen/Qwen2.5-0.5B-Instruct");
    expect(lines).toEqual([
      {
        custom_id: "request-1",
        method: "POST",
        url: "/v1/completions",
        body: { model: "Qwen/Qwen2.5-0.5B-Instruct", prompt: "What is 2+2?", max_tokens: 50 },
      },
      {
        custom_id: "request-2",
        method: "POST",
        url: "/v1/completions",
        body: { model: "Qwen/Qwen2.5-0.5B-Instruct", prompt: "Hello world", max_tokens: 50 },
      },
    ]);
    // The lines are ordinary batch lines that pass the file validator's schemas.
    for (const l of lines) {
      expect(BatchLineSchema.safeParse(l).success).toBe(true);
      expect(bodySchemaFor(endpoint).safeParse(l.body).success).toBe(true);
    }
  });

  it("maps messages to chat and input to embeddings, keeping custom_ids and item overrides", () => {
    const chat = inlineToLines(
      parse({ input: [{ custom_id: "q", messages: [{ role: "user", content: "hi" }], temperature: 0 }], temperature: 1, seed: 3 }),
    );
    expect(chat.endpoint).toBe("/v1/chat/completions");
    expect(chat.lines[0]).toEqual({
      custom_id: "q",
      method: "POST",
      url: "/v1/chat/completions",
      body: { messages: [{ role: "user", content: "hi" }], temperature: 0, seed: 3 },
    });
    const emb = inlineToLines(parse({ input: [{ input: "a" }, { input: ["b", "c"] }] }));
    expect(emb.endpoint).toBe("/v1/embeddings");
    expect(emb.lines.map((l) => l.body)).toEqual([{ input: "a" }, { input: ["b", "c"] }]);
  });

  it("lets a top-level endpoint adapt prompt items", () => {
    const chat = inlineToLines(
      parse({ endpoint: "/v1/chat/completions", input: [{ prompt: "p" }, { messages: [{ role: "user", content: "m" }] }], max_tokens: 5 }),
    );
    expect(chat.lines.map((l) => l.body)).toEqual([
      { messages: [{ role: "user", content: "p" }], max_tokens: 5 },
      { messages: [{ role: "user", content: "m" }], max_tokens: 5 },
    ]);
    expect(inlineToLines(parse({ endpoint: "/v1/embeddings", input: [{ prompt: "p" }] })).lines[0].body).toEqual({ input: "p" });
  });

  it("refuses items that map to different endpoints, with the item named", () => {
    expect(issue({ input: [{ prompt: "x" }, { messages: [{ role: "user", content: "y" }] }] })).toMatchObject({
      path: ["input", 1, "messages"],
      message: expect.stringMatching(/one endpoint/),
    });
    expect(issue({ endpoint: "/v1/completions", input: [{ input: "x" }] }).path).toEqual(["input", 0, "input"]);
  });

  it("refuses ambiguous, empty, misspelt and duplicate items", () => {
    expect(issue({ input: [{ prompt: "x", input: "y" }] }).message).toMatch(/exactly one/);
    expect(issue({ input: [{}] }).message).toMatch(/exactly one/);
    expect(issue({ input: [] }).message).toMatch(/at least one/);
    expect(issue({ input: [{ promt: "x" }] }).code).toBe("unrecognized_keys");
    expect(issue({ input: [{ prompt: "x" }, { prompt: "y", custom_id: "request-1" }] }).message).toMatch(
      /repeats the custom_id 'request-1'/,
    );
    expect(issue({ input: [{ prompt: "x" }], temperature: 9 }).path).toEqual(["temperature"]);
    expect(issue({ input: [{ input: "x" }], max_tokens: 4 }).message).toMatch(/does not apply to \/v1\/embeddings/);
  });

  it("inlineToLines itself refuses an inconsistent body", () => {
    const body = { input: [{ prompt: "x" }, { input: "y" }] } as Parameters<typeof inlineToLines>[0];
    expect(() => inlineToLines(body)).toThrow(InlineBatchError);
    try {
      inlineToLines(body);
    } catch (e) {
      expect((e as InlineBatchError).param).toBe("input[1].input");
    }
  });
});
