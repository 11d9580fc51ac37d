// Rerank and score batches end to end, as vLLM's run_batch takes them: lines with url /v1/rerank and /v1/score
// on the service over the generated reranker, then routed to llama.cpp's llama-server (--reranking, the same
// GGUF) as an upstream model, every custom_id once with a rerank or score body; and a batch of them for a model
// with no classification head, each line refused with model_cannot_rank. llama-server's part is skipped, with a
// note, where no build exists.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";
import { createBatch, fileLines, isFinal, pollBatch, uploadText } from "../../testkit/batch-client.js";
import { cachedLlamaServer, startLlamaServer } from "../../testkit/llama-server.js";
import { startTestService, type TestService } from "../helpers/service.js";

const binary = cachedLlamaServer();
if (!binary)
  console.warn(
    "tests/e2e/rank-batches.sys.test.ts: the upstream part is skipped: no llama-server build (bash scripts/build-llama-server.sh makes one)",
  );

const DOCS = ["a cat is a small animal", "the sky is blue", "cats purr when happy", "stock prices fell", "dogs bark"];
const N = 40;

/** N/2 rerank and N/2 score lines (for `endpoint`'s batch, only its own). */
function lines(endpoint: "/v1/rerank" | "/v1/score", model: string): string {
  return Array.from({ length: N }, (_, i) =>
    JSON.stringify({
      custom_id: `${endpoint.slice(4)}-${i}`,
      method: "POST",
      url: endpoint,
      body:
        endpoint === "/v1/rerank"
          ? { model, query: `question ${i}: what is a cat`, documents: DOCS, top_n: 3 }
          : { model, text_1: `question ${i}: what is a cat`, text_2: DOCS },
    }),
  ).join("\n");
}

async function run(svc: TestService, endpoint: "/v1/rerank" | "/v1/score", model: string) {
  const file = await uploadText(svc.baseUrl, lines(endpoint, model));
  const created = await createBatch(svc.baseUrl, file.id, { endpoint });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  const done = await pollBatch(svc.baseUrl, created.body.id, isFinal, { timeoutMs: 120_000 });
  return { done, output: await fileLines(svc.baseUrl, done.output_file_id), errors: await fileLines(svc.baseUrl, done.error_file_id) };
}

function checkOutput(endpoint: "/v1/rerank" | "/v1/score", output: any[], model: string) {
  expect(output.map((l) => l.custom_id).sort()).toEqual(Array.from({ length: N }, (_, i) => `${endpoint.slice(4)}-${i}`).sort());
  for (const l of output) {
    expect(l.response.status_code).toBe(200);
    const b = l.response.body;
    expect(b.model).toBe(model);
    expect(b.usage.prompt_tokens).toBeGreaterThan(0);
    if (endpoint === "/v1/rerank") {
      expect(b.results).toHaveLength(3);
      const scores = b.results.map((r: any) => r.relevance_score);
      expect([...scores].sort((x: number, y: number) => y - x)).toEqual(scores);
      for (const r of b.results) expect(DOCS[r.index]).toBeDefined();
    } else {
      expect(b.object).toBe("list");
      expect(b.data.map((d: any) => d.index)).toEqual(DOCS.map((_, i) => i));
      for (const d of b.data) expect(d.score >= 0 && d.score <= 1, String(d.score)).toBe(true);
    }
  }
}

let dir = "";
let reranker = "";
beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), "obi-rank-"));
  reranker = await ensureGeneratedModel({ preset: "reranker" });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("rank batches on the engine", () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService({ MODEL_PATH: reranker });
  }, 120_000);
  afterAll(() => svc?.close());

  it("runs rerank and score batches on the generated reranker, every line once", async () => {
    const model = (await (await fetch(`${svc.baseUrl}/v1/models`)).json()).data[0].id;
    for (const endpoint of ["/v1/rerank", "/v1/score"] as const) {
      const { done, output, errors } = await run(svc, endpoint, model);
      expect(done.status).toBe("completed");
      expect(done.request_counts).toEqual({ total: N, completed: N, failed: 0 });
      expect(errors).toEqual([]);
      checkOutput(endpoint, output, model);
      expect(done.usage?.output_tokens).toBe(0);
      expect(done.usage?.input_tokens).toBe(output.reduce((n, l) => n + l.response.body.usage.prompt_tokens, 0));
    }
  }, 180_000);
});

describe("rank batches for a model that cannot rank", () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService();
  }, 120_000);
  afterAll(() => svc?.close());

  it("refuses each line, naming the model", async () => {
    const { done, output, errors } = await run(svc, "/v1/rerank", "any");
    expect(done.request_counts).toEqual({ total: N, completed: 0, failed: N });
    expect(output).toEqual([]);
    expect(errors).toHaveLength(N);
    for (const e of errors) {
      expect(e.response.status_code).toBe(400);
      expect(e.response.body.error).toMatchObject({ code: "model_cannot_rank", param: "model" });
      expect(e.response.body.error.message).toContain(`The model '${done.model}' cannot rank`);
    }
  }, 180_000);
});

describe.skipIf(!binary)("rank batches through llama-server as an upstream", () => {
  let upstream: Awaited<ReturnType<typeof startLlamaServer>>;
  let svc: TestService;
  beforeAll(async () => {
    upstream = await startLlamaServer(binary!, reranker, { parallel: 4, threads: 1, ctxPerSlot: 256 }, ["--reranking"]);
    const models = path.join(dir, "models.yaml");
    writeFileSync(models, `models:\n  - { name: remote-reranker, upstream: { base_urls: ["${upstream.baseUrl}/v1"], model: reranker } }\n`);
    svc = await startTestService({ MODEL_PATH: "", MODELS_FILE: models });
  }, 120_000);
  afterAll(async () => {
    await svc?.close();
    await upstream?.stop();
  });

  it("runs rerank and score batches on the upstream, every line once, in this service's bodies", async () => {
    for (const endpoint of ["/v1/rerank", "/v1/score"] as const) {
      const { done, output, errors } = await run(svc, endpoint, "remote-reranker");
      expect(done.status).toBe("completed");
      expect(errors).toEqual([]);
      checkOutput(endpoint, output, "remote-reranker");
    }
  }, 180_000);
});
