// The result cache across processes' lifetimes and machines: in the distributed mode (PostgreSQL + S3) a batch run on
// worker A fills the cache and the same batch run on worker B is answered from it, an admin's DELETE /v1/cache on the
// API server empties it for both; on the embedded store, a batch after a restart of the service is answered from disk.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Service } from "../../app/service.js";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../testkit/postgres.js";
import { type SharedState, startNode, startSharedState, type TestNode } from "../helpers/cluster.js";
import { openaiClient, startTestService, waitForClientBatch } from "../helpers/service.js";

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

const LINES = 6;
const lines = (marker: string) =>
  Array.from({ length: LINES }, (_, i) =>
    JSON.stringify({
      custom_id: `${marker}-${i}`,
      method: "POST",
      url: "/v1/chat/completions",
      body: { model: "m", messages: [{ role: "user", content: `shared cache line ${i}` }], temperature: 0, max_tokens: 6 },
    }),
  ).join("\n");

/** How the node's loaded backends answered: computed, or from the cache (a hit or a repeat). */
function outcomes(service: Service) {
  const seen = { computed: 0, cached: 0 };
  for (const { backend } of service.models.backends()) {
    const execute = backend.execute.bind(backend);
    backend.execute = async (req, signal, options) => {
      const r = await execute(req, signal, options);
      if (r.cached) seen.cached++;
      else seen.computed++;
      return r;
    };
    // A batch's remembered lines are read without a turn on the backend (pipeline/run-batch.ts).
    const fromCache = backend.answerFromCache?.bind(backend);
    if (!fromCache) continue;
    backend.answerFromCache = async (req, options) => {
      const r = await fromCache(req, options);
      if (r) seen.cached++;
      return r;
    };
  }
  return seen;
}

/** Runs the lines through `node`'s API; the answers' texts in custom_id order. */
async function runBatch(node: { baseUrl: string }, marker: string): Promise<string[]> {
  const client = openaiClient(node);
  const file = await client.files.create({ file: await toFile(Buffer.from(lines(marker)), "in.jsonl"), purpose: "batch" });
  const created = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
  const done = await waitForClientBatch(client, created.id, 120_000);
  expect(done.status).toBe("completed");
  const out = (await (await client.files.content(done.output_file_id!)).text())
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  expect(out).toHaveLength(LINES);
  return out.sort((a, b) => a.custom_id.localeCompare(b.custom_id)).map((l) => l.response.body.choices[0].message.content as string);
}

describe.skipIf(!POSTGRES_BIN)("the result cache shared by the workers of the distributed mode", () => {
  let shared: SharedState;
  let api: TestNode;
  const workers: TestNode[] = [];

  beforeAll(async () => {
    shared = await startSharedState();
    api = await startNode(shared, { ROLE: "api" });
  }, 120_000);
  afterAll(async () => {
    for (const n of [...workers, api]) await n?.close({ graceMs: 0 });
    await shared?.close();
  }, 60_000);

  const worker = async (id: string) => {
    const w = await startNode(shared, { ROLE: "worker", WORKER_POOL: "spot", WORKER_ID: id });
    workers.push(w);
    return { w, seen: outcomes(w.node) };
  };

  it("worker A's answers serve worker B's identical batch; a purge on the API server makes B compute again", async () => {
    const a = await worker("w-a");
    const first = await runBatch(api, "a");
    expect(a.seen).toEqual({ computed: LINES, cached: 0 });
    await a.w.close({ graceMs: 0 });

    const b = await worker("w-b");
    expect(await runBatch(api, "b")).toEqual(first);
    expect(b.seen).toEqual({ computed: 0, cached: LINES });

    const purge = await fetch(`${api.baseUrl}/v1/cache`, { method: "DELETE" });
    expect(purge.status).toBe(200);
    expect(await purge.json()).toEqual({ object: "result_cache.purge", api_key_id: null, deleted: LINES });
    expect(await runBatch(api, "c")).toEqual(first);
    expect(b.seen).toEqual({ computed: LINES, cached: LINES });
  });
});

describe("the embedded result cache across a restart", () => {
  it("a batch after the service restarts on the same BATCH_DIR is answered from the store on disk", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "obi-restart-"));
    try {
      const before = await startTestService({ BATCH_DIR: dir });
      const seenBefore = outcomes(before.service);
      const first = await runBatch(before, "before");
      await before.close();
      expect(seenBefore).toEqual({ computed: LINES, cached: 0 });

      const after = await startTestService({ BATCH_DIR: dir });
      try {
        const seen = outcomes(after.service);
        expect(await runBatch(after, "after")).toEqual(first);
        expect(seen).toEqual({ computed: 0, cached: LINES });
      } finally {
        await after.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);
});
