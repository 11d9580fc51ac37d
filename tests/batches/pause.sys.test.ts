// Pause and resume on real runs, in both modes: a paused batch finishes what is in flight, claims nothing (its
// counts stand still), reads as `in_progress` with `paused_at` to OpenAI's client, and once resumed goes on from
// its checkpoint with nothing rerun; every custom_id once. Ended batches refuse both, naming the state. A pause or a
// cancel lets only the lines already generating finish: those waiting for a sequence go back unrun.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../../testkit/batch-client.js";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../testkit/postgres.js";
import { completionJsonl, customIds } from "../../testkit/workload.js";
import { apiAndWorker, countCalls, downloadResults } from "../helpers/cluster.js";
import { uploadJsonl } from "../helpers/http-batches.js";
import { openaiClient, startTestService, type TestService, waitForBatch } from "../helpers/service.js";

const LINES = 200;
/**
 * Lines of 48 tokens, or 24 in one process: there a pause lands within a poll of the tenth line, while a worker's
 * counts move by its checkpoints (every second), and the batch must still be running when they show.
 */
const EMBEDDED_TOKENS = 24;
/** The checkpoint race's batch: long enough to run through its eight pauses. */
const RACE_LINES = 300;
/** The distributed mode's settings: shards of 100 lines, checkpoints every second. */
// A pause lets requests in flight finish (SHUTDOWN_GRACE_SECONDS): long enough here that none is cut off and run again.
const COMMON = { SHARD_SIZE: "100", CHECKPOINT_SECONDS: "1", LEASE_SECONDS: "4", SHUTDOWN_GRACE_SECONDS: "20" };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const post = (base: string, path: string) => fetch(`${base}${path}`, { method: "POST" });
const get = async (base: string, id: string) => (await (await fetch(`${base}/v1/batches/${id}`)).json()) as any;

async function running(base: string, prefix: string, lines = LINES, maxTokens = 48): Promise<string> {
  const file = await uploadJsonl(base, completionJsonl(lines, { prefix, maxTokens }));
  const batch = await openaiClient({ baseUrl: base }).batches.create({
    input_file_id: file.id,
    endpoint: "/v1/completions",
    completion_window: "24h",
  });
  await until("some lines done", async () => {
    const b = await get(base, batch.id);
    return b.request_counts.completed >= 10 ? true : undefined;
  });
  return batch.id;
}

/** What was in flight finishes and is committed (however long a loaded machine takes); then nothing moves. */
async function standingStill(base: string, id: string): Promise<{ completed: number; failed: number; total: number }> {
  let held = (await get(base, id)).request_counts;
  await until(
    "the paused batch to stand still",
    async () => {
      await sleep(1_500);
      const now = (await get(base, id)).request_counts;
      const same = JSON.stringify(now) === JSON.stringify(held);
      held = now;
      return same ? true : undefined;
    },
    { timeoutMs: 60_000 },
  );
  await sleep(2_500);
  expect((await get(base, id)).request_counts).toEqual(held);
  return held;
}

/**
 * Many lines in flight per sequence: 40 of them on the engine's 2, so that nearly all of a running batch's lines
 * in flight wait for a sequence. Lines of 128 tokens: a few finish in the moment a pause takes to land. In one process
 * a pause's count is what is committed at once, so lines of 64 leave it as clear.
 */
const WAITING = { SEQUENCES: "2", PIPELINE_CONCURRENCY: "40" };
const WAITING_LINES = 80;

async function longRunning(base: string, prefix: string, maxTokens = 128): Promise<string> {
  const file = await uploadJsonl(base, completionJsonl(WAITING_LINES, { prefix, maxTokens }));
  const batch = await openaiClient({ baseUrl: base }).batches.create({
    input_file_id: file.id,
    endpoint: "/v1/completions",
    completion_window: "24h",
  });
  await until("a line done", async () => ((await get(base, batch.id)).request_counts.completed >= 1 ? true : undefined));
  return batch.id;
}

/** Paused: the lines generating finish, the 38 or so waiting for a sequence do not; resumed, each runs once. */
async function pauseHoldsWaiting(base: string, prefix: string, maxTokens?: number) {
  const id = await longRunning(base, prefix, maxTokens);
  const at = (await (await post(base, `/v1/batches/${id}/pause`)).json()).request_counts.completed;
  const held = await standingStill(base, id);
  expect(held.completed - at).toBeLessThan(20);
  await post(base, `/v1/batches/${id}/resume`);
  const done = await waitForBatch(base, id, 180_000);
  expect(done.request_counts).toEqual({ total: WAITING_LINES, completed: WAITING_LINES, failed: 0 });
  expect((await downloadResults({ baseUrl: base }, done)).ids).toEqual([...customIds(prefix, WAITING_LINES)].sort());
}

/** Cancelled: the lines generating finish, those waiting for a sequence end cancelled, unrun; every custom_id once. */
async function cancelHoldsWaiting(base: string, prefix: string) {
  const id = await longRunning(base, prefix);
  const at = (await (await post(base, `/v1/batches/${id}/cancel`)).json()).request_counts.completed;
  const done = await waitForBatch(base, id, 180_000);
  expect(done.status).toBe("cancelled");
  expect(done.request_counts.completed - at).toBeLessThan(20);
  const { output, errors, ids } = await downloadResults({ baseUrl: base }, done);
  expect(done.request_counts).toEqual({ total: WAITING_LINES, completed: output.length, failed: errors.length });
  for (const e of errors) expect(e.error.code).toBe("batch_cancelled");
  expect(ids).toEqual([...customIds(prefix, WAITING_LINES)].sort());
}

/** Pauses, sees the counts stand still, resumes, and checks the whole run. */
async function pauseAndResume(base: string, prefix: string, maxTokens?: number) {
  const id = await running(base, prefix, LINES, maxTokens);
  const res = await post(base, `/v1/batches/${id}/pause`);
  expect(res.status).toBe(200);
  const paused = await res.json();
  expect(paused).toMatchObject({ id, status: "in_progress", projected_finish_at: null });
  expect(paused.paused_at).toBeGreaterThan(0);
  // Again: nothing changes, the first pause's time stays.
  expect((await (await post(base, `/v1/batches/${id}/pause`)).json()).paused_at).toBe(paused.paused_at);
  // OpenAI's client reads a paused batch as a running one.
  expect((await openaiClient({ baseUrl: base }).batches.retrieve(id)).status).toBe("in_progress");
  const held = await standingStill(base, id);
  expect(held.completed).toBeLessThan(LINES);

  const resumed = await (await post(base, `/v1/batches/${id}/resume`)).json();
  expect(resumed.paused_at).toBeNull();
  const done = await waitForBatch(base, id, 180_000);
  expect(done.status).toBe("completed");
  expect(done.request_counts).toEqual({ total: LINES, completed: LINES, failed: 0 });
  const { output, ids } = await downloadResults({ baseUrl: base }, done);
  expect(output).toHaveLength(LINES);
  expect(ids).toEqual([...customIds(prefix, LINES)].sort());
  // Ended: both refused, naming why.
  await refusesBoth(base, id, "completed");
  return id;
}

/** Refused on an ended batch, naming its real status. */
async function refusesBoth(base: string, id: string, status: string) {
  for (const action of ["pause", "resume"]) {
    const refused = await post(base, `/v1/batches/${id}/${action}`);
    expect(refused.status).toBe(400);
    const { error } = await refused.json();
    expect(error).toMatchObject({ code: "batch_not_running" });
    expect(error.message).toContain(`is ${status}:`);
  }
}

/**
 * A batch that ends is not paused: one paused with its only line in flight completes as that line finishes (in one
 * process, where a pause lets the requests in flight finish), without `paused_at`, and a pause or a resume names how
 * it ended.
 */
async function completesUnpaused(base: string, prefix: string) {
  // A line long enough that the pause lands while it generates (a try whose line was already done goes again).
  let paused: any;
  let completed: any;
  for (let attempt = 0; !completed && attempt < 5; attempt++) {
    const file = await uploadJsonl(base, completionJsonl(1, { prefix: `${prefix}${attempt}`, maxTokens: 400, temperature: 1 }));
    const created = await openaiClient({ baseUrl: base }).batches.create({
      input_file_id: file.id,
      endpoint: "/v1/completions",
      completion_window: "24h",
    });
    await until("it runs", async () => ((await get(base, created.id)).status === "validating" ? undefined : true), { everyMs: 10 });
    // Each try waits longer before its pause (0, 100, 200, 400, 800 ms): on a loaded machine the line may take that
    // long to begin after the batch runs, and a pause before it begins sends it back unrun.
    await sleep(attempt === 0 ? 0 : 50 * 2 ** attempt);
    const res = await post(base, `/v1/batches/${created.id}/pause`);
    if (res.status !== 200) continue;
    paused = await res.json();
    // A pause lets only a line already generating finish: a line still waiting for its sequence went back unrun, and
    // its batch stands paused. That try is resumed, run out and made again.
    completed = await waitForBatch(base, created.id, 30_000).catch(() => undefined);
    if (completed) break;
    await post(base, `/v1/batches/${created.id}/resume`);
    await waitForBatch(base, created.id, 120_000);
  }
  expect(paused.paused_at).toBeGreaterThan(0);
  expect(completed).toMatchObject({ status: "completed", paused_at: null, request_counts: { completed: 1, total: 1 } });
  await refusesBoth(base, paused.id, "completed");
}

/** A batch paused then cancelled ends cancelled, without `paused_at`, and a pause or a resume says it is cancelled. */
async function cancelsUnpaused(base: string, prefix: string) {
  const id = await running(base, `${prefix}c`);
  expect((await (await post(base, `/v1/batches/${id}/pause`)).json()).paused_at).toBeGreaterThan(0);
  expect((await (await post(base, `/v1/batches/${id}/cancel`)).json()).paused_at).toBeNull();
  expect(await waitForBatch(base, id, 120_000)).toMatchObject({ status: "cancelled", paused_at: null });
  await refusesBoth(base, id, "cancelled");
}

describe("pause and resume (embedded mode)", () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService({ SEQUENCES: "2" });
  }, 120_000);
  afterAll(() => svc?.close());

  it("holds a running batch and lets it go on where it stopped", async () => {
    await pauseAndResume(svc.baseUrl, "emb", EMBEDDED_TOKENS);
    expect((await post(svc.baseUrl, "/v1/batches/batch_00000000000000000000dead/pause")).status).toBe(404);
  }, 240_000);

  it("a batch that ends while paused, completed or cancelled, is not paused", async () => {
    await completesUnpaused(svc.baseUrl, "eend");
    await cancelsUnpaused(svc.baseUrl, "eend");
  }, 240_000);

  it("pauses and resumes every batch of a model at once", async () => {
    const id = await running(svc.baseUrl, "many", LINES, EMBEDDED_TOKENS);
    const { model } = await get(svc.baseUrl, id);
    const many = (action: string, body: unknown) =>
      fetch(`${svc.baseUrl}/v1/batches/${action}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const refused = await many("pause", {});
    expect(refused.status).toBe(400);
    expect((await refused.json()).error.message).toMatch(/api_key_id, model/);
    expect((await (await many("pause", { model: "no-such-model" })).json()).data).toEqual([]);
    const paused = await (await many("pause", { model })).json();
    expect(paused).toMatchObject({ object: "list", data: [{ id, status: "in_progress" }] });
    expect((await get(svc.baseUrl, id)).paused_at).toBeGreaterThan(0);
    const resumed = await (await many("resume", { model })).json();
    expect(resumed.data.map((b: any) => [b.id, b.paused_at])).toEqual([[id, null]]);
    expect((await waitForBatch(svc.baseUrl, id, 180_000)).status).toBe("completed");
  }, 240_000);
});

describe("a pause or a cancel lets only the lines generating finish (embedded mode)", () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService(WAITING);
  }, 120_000);
  afterAll(() => svc?.close());

  it(
    "paused: the lines waiting for a sequence go back unrun, and run once on resume",
    () => pauseHoldsWaiting(svc.baseUrl, "ew", 64),
    240_000,
  );
  it("cancelled: the lines waiting for a sequence end cancelled, unrun", () => cancelHoldsWaiting(svc.baseUrl, "ec"), 240_000);
});

describe("a pause or a cancel lets only the lines generating finish (distributed mode)", () => {
  const nodes = apiAndWorker("memory", { ...COMMON, ...WAITING }, "w-wait");

  it(
    "paused: the lines waiting for a sequence go back unrun, and run once on resume",
    () => pauseHoldsWaiting(nodes.api.baseUrl, "dw"),
    240_000,
  );
  it("cancelled: the lines waiting for a sequence end cancelled, unrun", () => cancelHoldsWaiting(nodes.api.baseUrl, "dc"), 240_000);
});

describe("pause and resume (distributed mode: an API server and a worker)", () => {
  const nodes = apiAndWorker("memory", COMMON, "w1");

  it("the API server pauses, the worker hands the shards back, resume reruns nothing", async () => {
    await pauseAndResume(nodes.api.baseUrl, "dist");
    // Each line reached the engine once: what was in flight at the pause was kept, not run again.
    const calls = countCalls(nodes.worker).filter((b) => b.includes("story dist "));
    expect(new Set(calls).size).toBe(LINES);
    expect(calls).toHaveLength(LINES);
  }, 240_000);

  it("pauses and resumes racing the shards' checkpoints (every second), and still runs each line once", async () => {
    const id = await running(nodes.api.baseUrl, "race", RACE_LINES);
    const moves: string[] = [];
    const t0 = Date.now();
    // Pauses land before, during and after checkpoints: offsets spread over more than a checkpoint's period.
    for (const wait of [0, 130, 470, 810, 1_090, 260, 990, 640]) {
      await post(nodes.api.baseUrl, `/v1/batches/${id}/pause`);
      moves.push(`paused ${Date.now() - t0}`);
      await sleep(wait);
      await post(nodes.api.baseUrl, `/v1/batches/${id}/resume`);
      moves.push(`resumed ${Date.now() - t0}`);
      await sleep(1_000 - (wait % 1_000));
    }
    const done = await waitForBatch(nodes.api.baseUrl, id, 180_000);
    expect(done.status).toBe("completed");
    expect(done.request_counts).toEqual({ total: RACE_LINES, completed: RACE_LINES, failed: 0 });
    const { ids } = await downloadResults(nodes.api, done);
    expect(ids).toEqual([...customIds("race", RACE_LINES)].sort());
    // A request in flight at a pause finishes and is kept: none reaches the engine twice. Failing, the message says
    // when each line that began twice began (ms from the first pause), beside the pauses and resumes.
    const { bodies, at } = nodes.worker.calls;
    const began = new Map<string, number[]>();
    for (const [i, b] of bodies.entries()) if (b.includes("story race ")) began.set(b, [...(began.get(b) ?? []), at[i] - t0]);
    const twice = [...began].filter(([, times]) => times.length > 1).map(([b, times]) => `${/story race \d+/.exec(b)} at ${times}`);
    expect(twice, moves.join(", ")).toEqual([]);
    expect(began.size).toBe(RACE_LINES);
  }, 240_000);

  it("a batch paused then cancelled is not paused", () => cancelsUnpaused(nodes.api.baseUrl, "dend"), 240_000);
});

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

describe.skipIf(!POSTGRES_BIN)("pause and resume (distributed mode on PostgreSQL and S3)", () => {
  const nodes = apiAndWorker("postgres", COMMON, "pg-w1");

  it("the claim and the heartbeat read the pause from the database; resume reruns nothing", async () => {
    await pauseAndResume(nodes.api.baseUrl, "pgp");
    const calls = countCalls(nodes.worker).filter((b) => b.includes("story pgp "));
    expect(new Set(calls).size).toBe(LINES);
    expect(calls).toHaveLength(LINES);
  }, 240_000);

  it("a batch paused then cancelled is not paused", () => cancelsUnpaused(nodes.api.baseUrl, "pgend"), 240_000);
});
