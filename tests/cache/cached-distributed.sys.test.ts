// The result cache in the distributed mode on real PostgreSQL and S3: one batch's answers, computed by two workers,
// answer a later batch of the same requests on both of them, and the batch read from the database counts its
// cached lines and tokens as the output says. Skips with a note where PostgreSQL is absent.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../testkit/postgres.js";
import { completionJsonl } from "../../testkit/workload.js";
import { downloadResults, type SharedState, startedAfter, startNode, startSharedState, type TestNode } from "../helpers/cluster.js";
import { uploadJsonl } from "../helpers/http-batches.js";
import { openaiClient, waitForBatch } from "../helpers/service.js";

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

const N = 20;
const lines = (prefix: string) => completionJsonl(N, { prefix, maxTokens: 6, prompt: (i) => `Once upon a time, shared story ${i}:` });

describe.skipIf(!POSTGRES_BIN)("the result cache shared by workers (PostgreSQL + S3)", () => {
  let shared: SharedState;
  let api: TestNode;
  let workers: TestNode[] = [];

  beforeAll(async () => {
    shared = await startSharedState();
    const common = { SHARD_SIZE: "4", CHECKPOINT_SECONDS: "1", LEASE_SECONDS: "4" };
    api = await startNode(shared, { ...common, ROLE: "api" });
    workers = [
      await startNode(shared, { ...common, ROLE: "worker", WORKER_POOL: "spot", WORKER_CAPACITY: "1", WORKER_ID: "w-1" }),
      await startNode(shared, { ...common, ROLE: "worker", WORKER_POOL: "spot", WORKER_CAPACITY: "1", WORKER_ID: "w-2" }),
    ];
  }, 120_000);

  afterAll(async () => {
    for (const n of [...workers, api]) await n?.close();
    await shared?.close();
  }, 60_000);

  async function run(prefix: string) {
    const file = await uploadJsonl(api.baseUrl, lines(prefix));
    const created = await openaiClient(api).batches.create({
      input_file_id: file.id,
      endpoint: "/v1/completions",
      completion_window: "24h",
    });
    const done = (await waitForBatch(api.baseUrl, created.id, 120_000)) as any;
    expect(done.status).toBe("completed");
    return { done, output: (await downloadResults(api, done)).output as any[] };
  }

  const hits = async (w: TestNode) => {
    const text = await (await fetch(`${w.baseUrl}/metrics`)).text();
    const found = text.split("\n").find((l) => l.startsWith("obi_result_cache_hits_total{") && l.includes('kind="hit"'));
    return found ? Number(found.split(" ").at(-1)) : 0;
  };

  it("answers a second batch on both workers from the answers the first computed", async () => {
    const first = await run("one");
    expect(first.done.cached_lines).toBe(first.output.filter((l) => l.cached).length);
    const firstDone = Date.now();
    const hitsBefore = await Promise.all(workers.map(hits));

    const { done, output } = await run("two");
    expect(output.map((l) => l.cached)).toEqual(Array(N).fill("hit"));
    expect(done.cached_lines).toBe(N);
    expect(done.usage.input_tokens).toBe(first.done.usage.input_tokens);
    expect(done.usage.input_tokens_details.cached_tokens).toBe(done.usage.input_tokens);
    expect(done.usage.output_tokens_details.cached_tokens).toBe(done.usage.output_tokens);
    // Both workers took shards of it, and each answered its lines from the table they share.
    for (const w of workers) expect(startedAfter(w.calls, "shared story", firstDone).length).toBeGreaterThan(0);
    const gained = (await Promise.all(workers.map(hits))).map((h, i) => h - hitsBefore[i]);
    expect(gained.every((g) => g > 0)).toBe(true);
    expect(gained[0] + gained[1]).toBe(N);
  }, 240_000);
});
