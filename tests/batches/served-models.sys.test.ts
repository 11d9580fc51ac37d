// The distributed mode names batches by the models its live workers serve: an API server given no models (as the
// deployment page starts one) takes its workers', and a batch for a model no live worker serves fails saying so.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../../testkit/batch-client.js";
import { testModelPath } from "../../testkit/model.js";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../testkit/postgres.js";
import { completionJsonl } from "../../testkit/workload.js";
import { type SharedState, startNode, startSharedState, type TestNode } from "../helpers/cluster.js";
import { uploadJsonl } from "../helpers/http-batches.js";
import { openaiClient, waitForBatch } from "../helpers/service.js";

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

const COMMON = { SHARD_SIZE: "10", CHECKPOINT_SECONDS: "1", LEASE_SECONDS: "4" };

describe.skipIf(!POSTGRES_BIN)("the models the live workers serve", () => {
  let shared: SharedState;
  let api: TestNode;
  const nodes: TestNode[] = [];
  const dir = mkdtempSync(path.join(os.tmpdir(), "obi-served-"));

  const create = async (node: TestNode, model: string, prefix: string) => {
    const file = await uploadJsonl(node.baseUrl, completionJsonl(4, { prefix, maxTokens: 4, model }));
    return fetch(`${node.baseUrl}/v1/batches`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" }),
    });
  };

  beforeAll(async () => {
    shared = await startSharedState();
    // As docs/deployment.md starts it: no MODEL_PATH, no MODELS_FILE.
    api = await startNode(shared, { ...COMMON, ROLE: "api", MODEL_PATH: "" });
    nodes.push(api);
  }, 60_000);
  afterAll(async () => {
    for (const n of nodes) await n.close({ graceMs: 0 });
    await shared?.close();
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it("refuses a batch while no worker is live (503, Retry-After), then names it by the worker's model and runs it", async () => {
    const early = await create(api, "stories260K", "sm0");
    expect(early.status).toBe(503);
    expect(early.headers.get("retry-after")).toBe("5");
    expect(((await early.json()) as any).error.code).toBe("no_worker_live");

    const worker = await startNode(shared, { ...COMMON, ROLE: "worker", WORKER_ID: "sm-one-model" });
    nodes.push(worker);
    const served = path.basename(await testModelPath()).replace(/\.gguf$/, "");
    // The one-model worker answers to every name, so the API server does too, naming the batch by the worker's model.
    const res = await create(api, "whatever-the-client-says", "sm1");
    expect(res.status).toBe(200);
    const batch = (await res.json()) as any;
    expect(batch.model).toBe(served);
    const done = await waitForBatch(api.baseUrl, batch.id, 60_000);
    expect(done).toMatchObject({ status: "completed", model: served, request_counts: { completed: 4, failed: 0, total: 4 } });
    expect(((await (await fetch(`${api.baseUrl}/v1/models`)).json()) as any).data.map((m: any) => m.id)).toEqual([served]);
    const sync = await openaiClient(api).completions.create({ model: served, prompt: "Once upon a time", max_tokens: 4 });
    expect(sync.model).toBe(served);
    await worker.close({ graceMs: 0 });
  }, 120_000);

  it("fails at once a batch for a model no live worker serves, naming those served; runs one for a model served", async () => {
    const models = path.join(dir, "models.yaml");
    writeFileSync(models, `models:\n  - { name: tiny, aliases: [small-one], local: { path: ${await testModelPath()} } }\n`);
    const worker = await startNode(shared, { ...COMMON, ROLE: "worker", WORKER_ID: "sm-models", MODEL_PATH: "", MODELS_FILE: models });
    nodes.push(worker);
    // The last test's worker was killed: until its record lapses it is live, and, serving one model, takes any name.
    const listed = async () => ((await (await fetch(`${api.baseUrl}/v1/models`)).json()) as any).data.map((m: any) => m.id);
    await until("only this worker's models listed", async () => ((await listed()).join() === "tiny" ? true : undefined), {
      timeoutMs: 30_000,
      everyMs: 200,
    });
    const refused = (await (await create(api, "gpt-4o", "sm2")).json()) as any;
    expect(refused.status).toBe("failed");
    expect(refused.errors.data[0]).toMatchObject({
      code: "model_not_found",
      message: "The model 'gpt-4o' is not served here; the models served are: tiny.",
    });
    const byAlias = (await (await create(api, "small-one", "sm3")).json()) as any;
    expect(byAlias.model).toBe("tiny");
    expect((await waitForBatch(api.baseUrl, byAlias.id, 60_000)).status).toBe("completed");

    // An API server with models of its own still fails a batch whose model no live worker serves, instead of
    // leaving it queued in silence.
    const own = await startNode(shared, { ...COMMON, ROLE: "api" });
    nodes.push(own);
    const unserved = (await (await create(own, "stories", "sm4")).json()) as any;
    expect(unserved.status).toBe("failed");
    expect(unserved.errors.data[0].message).toMatch(/is not served here; the models served are: none \(no live worker serves one\)\.$/);
  }, 120_000);
});
