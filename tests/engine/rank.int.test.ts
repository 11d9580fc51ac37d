// Rerank and score lines on the real engine over the generated reranker (`gen-model --preset reranker`: Qwen3's
// architecture with a yes/no classification head, as Qwen3-Reranker's GGUF has): Cohere's and Jina's rerank
// body (best first, top_n, return_documents), vLLM's score body (one against many, pairwise), the same score for
// the same pair either way, bad bodies refused naming the field, a pair past the context refused naming its
// document, and a model with no head refusing both, naming the model.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LlamaBackend } from "../../engine/adapter/openai-backend.js";
import { createEngine } from "../../engine/index.js";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";
import type { Engine } from "../../engine/types.js";
import type { Endpoint } from "../../openai/backend.js";
import { RequestError } from "../../openai/errors.js";
import { parseRequest } from "../../parse/request.js";
import { openTestEngine } from "../../testkit/model.js";
import { runLine } from "../helpers/test-engine.js";

let ranker: Engine;
let plain: Engine;
let backend: LlamaBackend;
beforeAll(async () => {
  ranker = await createEngine({
    modelPath: await ensureGeneratedModel({ preset: "reranker" }),
    generatedModel: true,
    gpu: false,
    threads: 1,
    sequences: 2,
    contextSize: 256,
    embeddingContexts: 2,
  });
  backend = new LlamaBackend(ranker, "reranker");
  plain = await openTestEngine();
}, 120_000);
afterAll(async () => {
  await ranker?.close();
  await plain?.close();
});

const run = runLine;
const refusal = async (p: Promise<unknown>) => {
  const err = await p.then(
    () => undefined,
    (e) => e,
  );
  expect(err).toBeInstanceOf(RequestError);
  return err as RequestError;
};

const docs = ["a cat is a small animal", "the sky is blue", "cats purr when happy", "stock prices fell"];

describe("rank lines on the engine", () => {
  it("knows the model ranks", () => {
    expect(ranker.info.ranking).toBe(true);
    expect(backend.info.settings.ranking).toBe(true);
    expect(plain.info.ranking).toBe(false);
  });

  it("answers /v1/rerank best first, cut to top_n, documents returned when asked", async () => {
    const all = await run(backend, "/v1/rerank", { model: "reranker", query: "what is a cat", documents: docs });
    const results = all.body.results as Array<{ index: number; relevance_score: number; document?: unknown }>;
    expect(all.body).toMatchObject({ model: "reranker", id: expect.stringMatching(/^rerank-/) });
    expect(results.map((r) => r.index).sort()).toEqual([0, 1, 2, 3]);
    for (const r of results) expect(r.relevance_score > 0 && r.relevance_score < 1, String(r.relevance_score)).toBe(true);
    for (let i = 1; i < results.length; i++) expect(results[i - 1].relevance_score).toBeGreaterThanOrEqual(results[i].relevance_score);
    expect(results[0].document).toBeUndefined();
    expect(all.usage.promptTokens).toBeGreaterThan(0);
    expect(all.body.usage).toEqual({ prompt_tokens: all.usage.promptTokens, total_tokens: all.usage.promptTokens });

    const top = await run(backend, "/v1/rerank", {
      query: "what is a cat",
      documents: docs.map((text) => ({ text })),
      top_n: 2,
      return_documents: true,
    });
    const best = top.body.results as Array<{ index: number; relevance_score: number; document: { text: string } }>;
    expect(best).toHaveLength(2);
    expect(best.map((r) => [r.index, r.relevance_score])).toEqual(results.slice(0, 2).map((r) => [r.index, r.relevance_score]));
    expect(best[0].document.text).toBe(docs[best[0].index]);
  });

  it("answers /v1/score one against many and pairwise, the same score for the same pair", async () => {
    const rerank = await run(backend, "/v1/rerank", { query: "what is a cat", documents: docs });
    const byIndex = new Map(
      (rerank.body.results as Array<{ index: number; relevance_score: number }>).map((r) => [r.index, r.relevance_score]),
    );
    const many = await run(backend, "/v1/score", { model: "reranker", text_1: "what is a cat", text_2: docs });
    expect(many.body).toMatchObject({ object: "list", model: "reranker", id: expect.stringMatching(/^score-/) });
    const data = many.body.data as Array<{ index: number; object: string; score: number }>;
    expect(data.map((d) => [d.index, d.object])).toEqual(docs.map((_, i) => [i, "score"]));
    for (const d of data) expect(d.score).toBeCloseTo(byIndex.get(d.index)!, 5);
    const pairwise = await run(backend, "/v1/score", { text_1: ["what is a cat", "what is the sky"], text_2: [docs[0], docs[1]] });
    const scores = (pairwise.body.data as Array<{ score: number }>).map((d) => d.score);
    expect(scores[0]).toBeCloseTo(byIndex.get(0)!, 5);
    const one = await run(backend, "/v1/score", { text_1: "what is the sky", text_2: docs[1] });
    expect((one.body.data as Array<{ score: number }>)[0].score).toBeCloseTo(scores[1], 5);
    expect(one.body.usage).toMatchObject({ completion_tokens: 0 });
  });

  it("refuses bad bodies naming the field, and a pair past the context naming its document", async () => {
    const cases: Array<[Endpoint, unknown, string]> = [
      ["/v1/rerank", { query: "q" }, "documents"],
      ["/v1/rerank", { query: "", documents: ["d"] }, "query"],
      ["/v1/rerank", { query: "q", documents: [] }, "documents"],
      ["/v1/rerank", { query: "q", documents: ["d"], top_n: 0 }, "top_n"],
      ["/v1/rerank", { query: "q", documents: ["d"], max_chunks_per_doc: 3 }, "max_chunks_per_doc"],
      ["/v1/score", { text_1: ["a", "b"], text_2: ["c"] }, "text_2"],
      ["/v1/score", { text_1: ["a"], text_2: "c" }, "text_2"],
      ["/v1/score", { text_1: "a" }, "text_2"],
    ];
    for (const [endpoint, body, param] of cases)
      expect((await refusal(run(backend, endpoint, body))).param, JSON.stringify(body)).toBe(param);
    const long = await refusal(run(backend, "/v1/rerank", { query: "q", documents: ["short", "cat ".repeat(400)] }));
    expect(long).toMatchObject({ code: "context_length_exceeded", param: "documents[1]", retryable: false });
  });

  it("refuses rank and score lines on a model with no classification head, naming it as the client does", async () => {
    // The name the models file serves it under, not its file's.
    const stories = new LlamaBackend(plain, "storyteller");
    for (const [endpoint, body] of [
      ["/v1/rerank", { query: "q", documents: ["d"] }],
      ["/v1/score", { text_1: "q", text_2: "d" }],
    ] as const) {
      const request = parseRequest(endpoint, body);
      for (const err of [await refusal(Promise.resolve().then(() => stories.check(request))), await refusal(stories.execute(request))]) {
        expect(err).toMatchObject({ code: "model_cannot_rank", param: "model", retryable: false });
        expect(err.message).toMatch(/^The model 'storyteller' cannot rank: it has no classification head/);
        expect(err.message).not.toContain(plain.info.modelId);
      }
    }
  });
});
