// Whatever dies when: three worker processes, one killed with -9 and restarted every few seconds at random moments
// (mid-claim, mid-checkpoint, mid-finish), over four batches at once. Every batch completes with each custom_id
// exactly once and completed + failed == total. Seeded, so a failure replays.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rng } from "../../testkit/fuzz.js";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../testkit/postgres.js";
import { completionJsonl, customIds } from "../../testkit/workload.js";
import { downloadResults, type SharedState, startChild, startNode, startSharedState, type TestNode } from "../helpers/cluster.js";
import { uploadJsonl } from "../helpers/http-batches.js";
import type { ServerProcess } from "../helpers/process.js";
import { openaiClient, waitForBatch } from "../helpers/service.js";

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

const SEED = Number(process.env.CHAOS_SEED ?? 13);
const COMMON = { SHARD_SIZE: "25", CHECKPOINT_SECONDS: "1", LEASE_SECONDS: "3" };

describe.skipIf(!POSTGRES_BIN)("chaos: workers killed at random moments", () => {
  let shared: SharedState;
  let api: TestNode;
  const workers: ServerProcess[] = [];

  const worker = (i: number) => startChild(shared, { ...COMMON, ROLE: "worker", WORKER_ID: `chaos-${i}` });

  beforeAll(async () => {
    shared = await startSharedState();
    api = await startNode(shared, { ...COMMON, ROLE: "api" });
  }, 60_000);
  afterAll(async () => {
    for (const w of workers) if (w.child.exitCode === null) w.child.kill("SIGKILL");
    await api?.close();
    await shared?.close();
  }, 60_000);

  it(`every batch completes with each custom_id once (seed ${SEED})`, async () => {
    const rand = rng(SEED);
    for (let i = 0; i < 3; i++) workers[i] = await worker(i);
    const sizes = [600, 375, 490, 300];
    const batches = [];
    for (const [i, n] of sizes.entries()) {
      const file = await uploadJsonl(api.baseUrl, completionJsonl(n, { prefix: `ch${i}`, maxTokens: 32 }));
      batches.push(
        await openaiClient(api).batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" }),
      );
    }
    const restarting: Array<Promise<void> | undefined> = [];
    let kills = 0;
    let killsMidRun = 0;
    const until = Date.now() + 40_000;
    while (Date.now() < until) {
      await new Promise((r) => setTimeout(r, 500 + rand() * 2_000));
      const i = Math.floor(rand() * 3);
      const open = await Promise.all(batches.map(async (b) => (await openaiClient(api).batches.retrieve(b.id)).status));
      if (!open.some((st) => st === "validating" || st === "in_progress")) break;
      // A slot whose replacement is still starting is left alone; the others keep dying meanwhile.
      if (restarting[i]) continue;
      killsMidRun++;
      workers[i].child.kill("SIGKILL");
      await workers[i].exited;
      kills++;
      restarting[i] = worker(i).then((w) => {
        workers[i] = w;
        restarting[i] = undefined;
      });
    }
    await Promise.all(restarting);
    for (const [i, b] of batches.entries()) {
      const done = await waitForBatch(api.baseUrl, b.id, 120_000);
      expect(done.status, b.id).toBe("completed");
      expect(done.request_counts).toEqual({ completed: sizes[i], failed: 0, total: sizes[i] });
      const { output, ids } = await downloadResults(api, done);
      expect(output.length).toBe(sizes[i]);
      expect(ids).toEqual(customIds(`ch${i}`, sizes[i]).sort());
    }
    // The kills fell while work was under way, not after it had all finished.
    expect(killsMidRun).toBeGreaterThanOrEqual(5);
    console.log(`chaos seed ${SEED}: ${kills} kills, ${killsMidRun} while batches ran`);
  }, 240_000);
});
