// SLA enforcement through the real service: two long batches hold every slot (spot and dedicated); an urgent one
// arrives; the spot batch's shard yields at its next checkpoint, the urgent batch takes the slot and ends first,
// and the yielded batch resumes from its checkpoint. Every request ran exactly once (the engine's calls counted),
// on one machine (in-process pools) and on PostgreSQL and S3 with a spot and a dedicated worker.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../testkit/postgres.js";
import { completionJsonl } from "../../testkit/workload.js";
import { closeCluster, type SharedState, startNode, startSharedState, type TestNode } from "../helpers/cluster.js";
import { uploadJsonl } from "../helpers/http-batches.js";
import { openaiClient, waitForBatch } from "../helpers/service.js";

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

const ran = (calls: string[], marker: string) => calls.filter((b) => b.includes(`story ${marker} `)).length;
const metric = (text: string, name: string) =>
  text
    .split("\n")
    .filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `))
    .reduce((n, l) => n + Number(l.split(" ").at(-1)), 0);

async function submit(api: TestNode, n: number, marker: string, window: string, maxTokens: number) {
  const file = await uploadJsonl(api.baseUrl, completionJsonl(n, { prefix: marker, maxTokens }));
  return openaiClient(api).batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: window as "24h" });
}

/** Two long batches on both slots, then an urgent one: it overtakes them, and nothing runs twice. */
async function overtake(api: TestNode, workers: TestNode[], prefix: string) {
  const long = [await submit(api, 200, `${prefix}a`, "24h", 48), await submit(api, 200, `${prefix}b`, "24h", 48)];
  const client = openaiClient(api);
  await expect
    .poll(async () => (await Promise.all(long.map((b) => client.batches.retrieve(b.id)))).every((b) => b.request_counts!.completed > 0), {
      timeout: 30_000,
    })
    .toBe(true);
  // 5 minutes to its deadline, under SLA_URGENT_SECONDS (600): urgent.
  const urgent = await submit(api, 8, `${prefix}u`, "5m", 8);
  const u = await waitForBatch(api.baseUrl, urgent.id, 60_000);
  const [a, b] = await Promise.all(long.map((x) => waitForBatch(api.baseUrl, x.id, 120_000)));
  expect([u.status, a.status, b.status]).toEqual(["completed", "completed", "completed"]);
  expect(u.completed_at).toBeLessThanOrEqual(Math.min(a.completed_at, b.completed_at));
  expect(u.deadline_met).toBe(true);
  // The spot batch yielded (its pool then moved, or stayed spot once the slot came back); nothing ran twice.
  const calls = workers.flatMap((w) => w.calls.bodies);
  expect([ran(calls, `${prefix}a`), ran(calls, `${prefix}b`), ran(calls, `${prefix}u`)]).toEqual([200, 200, 8]);
  const texts = await Promise.all(workers.map(async (w) => (await fetch(`${w.baseUrl}/metrics`)).text()));
  expect(texts.reduce((n, t) => n + metric(t, "obi_sla_yields_total"), 0)).toBe(1);
  expect(texts.some((t) => /obi_sla_yields_total\{[^}]*pool="spot"[^}]*\} 1/.test(t))).toBe(true);
}

describe("SLA yield on one machine (the in-process pools)", () => {
  let node: TestNode;
  beforeAll(async () => {
    node = await startNode(
      { env: {} },
      { SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "1", SHUTDOWN_GRACE_SECONDS: "3", SEQUENCES: "4", CONTEXT_SIZE: "256" },
    );
  }, 60_000);
  afterAll(async () => node?.close({ graceMs: 0 }), 60_000);

  it("an urgent batch overtakes two long ones: the spot one yields and resumes from its checkpoint; each request once", async () => {
    await overtake(node, [node], "e");
  }, 180_000);
});

describe.skipIf(!POSTGRES_BIN)("SLA yield across workers (PostgreSQL and S3)", () => {
  let shared: SharedState;
  const nodes: TestNode[] = [];
  beforeAll(async () => {
    shared = await startSharedState();
    const common = { SHARD_SIZE: "1000", CHECKPOINT_SECONDS: "1", LEASE_SECONDS: "30", SHUTDOWN_GRACE_SECONDS: "3" };
    nodes.push(await startNode(shared, { ...common, ROLE: "api" }));
    nodes.push(await startNode(shared, { ...common, ROLE: "worker", WORKER_ID: "y-spot", WORKER_POOL: "spot", WORKER_CAPACITY: "1" }));
    nodes.push(await startNode(shared, { ...common, ROLE: "worker", WORKER_ID: "y-ded", WORKER_POOL: "dedicated", WORKER_CAPACITY: "1" }));
  }, 90_000);
  afterAll(() => closeCluster(nodes, shared), 60_000);

  it("an urgent batch overtakes two long ones: the spot worker's shard yields; each request once", async () => {
    await overtake(nodes[0], nodes.slice(1), "d");
  }, 180_000);
});
