// A running batch's output read as it is committed (GET /v1/batches/{id}/output), in both modes: lines come before
// the batch ends, each read after the lines a reader has gives the next ones, never one twice, and the lines read
// are the output file's, line for line, in its order (in the distributed mode, three shards' lines interleaved as
// they were committed, with a worker stopped mid-run and its shards taken over). Bad reads are 400s naming the
// parameter; another key's batch is not found.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { outputSince } from "../../testkit/batch-client.js";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../testkit/postgres.js";
import { completionJsonl, customIds } from "../../testkit/workload.js";
import { apiAndWorker } from "../helpers/cluster.js";
import { uploadJsonl } from "../helpers/http-batches.js";
import { writeKeysFile } from "../helpers/keys.js";
import { startTestService, type TestService, waitForBatch } from "../helpers/service.js";

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

const LINES = 300;
/** The batch whose reads are checked once it has ended. */
const READ_LINES = 40;
const COMMON = { SHARD_SIZE: "100", CHECKPOINT_SECONDS: "1", LEASE_SECONDS: "3", WORKER_CAPACITY: "3" };
/** The lines the last follow() read. */
let lastRead: string[] = [];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function start(base: string, prefix: string, headers: Record<string, string> = {}, lines = LINES): Promise<string> {
  const file = await uploadJsonl(base, completionJsonl(lines, { prefix, maxTokens: 32 }), headers);
  const res = await fetch(`${base}/v1/batches`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" }),
  });
  return ((await res.json()) as { id: string }).id;
}

/**
 * Follows the batch to its end, reading every 250 ms after the lines it has (`midway` runs once, after the first
 * lines); then checks the reads against the output file. Returns the lines read while it ran.
 */
async function follow(
  base: string,
  id: string,
  prefix: string,
  opts: { headers?: Record<string, string>; midway?: () => Promise<void> } = {},
): Promise<number> {
  const headers = opts.headers ?? {};
  const read: string[] = [];
  let early = 0;
  let status = "";
  let prior: number | undefined;
  for (const deadline = Date.now() + 240_000; Date.now() < deadline; ) {
    const got = await outputSince(base, id, read.length, { headers });
    expect(got).toBeDefined();
    read.push(...got!);
    const b = (await (await fetch(`${base}/v1/batches/${id}`, { headers })).json()) as any;
    status = b.status;
    // Never more than the batch counts: only committed lines are read.
    expect(read.length).toBeLessThanOrEqual(b.request_counts.completed);
    if (["completed", "failed", "cancelled", "expired"].includes(status)) {
      read.push(...(await outputSince(base, id, read.length, { headers }))!);
      break;
    }
    early = read.length;
    if (opts.midway && prior === undefined && read.length > 0) {
      prior = read.length;
      await opts.midway();
    }
    await sleep(250);
  }
  expect(status).toBe("completed");
  const done = await waitForBatch(base, id, 60_000, headers);
  const file = await fetch(`${base}/v1/files/${done.output_file_id}/content`, { headers });
  const output = (await file.text())
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  expect(output.map((l) => l.custom_id).sort()).toEqual([...customIds(prefix, LINES)].sort());
  // The reads are the output file, line for line, in its order.
  expect(read.map((l) => JSON.parse(l).custom_id)).toEqual(output.map((l) => l.custom_id));
  expect(new Set(read).size).toBe(LINES);
  lastRead = read;
  // Nothing past the end; a read's headers say where it stands.
  const res = await fetch(`${base}/v1/batches/${id}/output?after=${LINES - 2}`, { headers });
  expect(res.headers.get("x-output-committed")).toBe(String(LINES));
  expect(res.headers.get("x-output-through")).toBe(String(LINES));
  expect((await res.text()).trim().split("\n")).toHaveLength(2);
  expect(await outputSince(base, id, LINES, { headers })).toEqual([]);
  // The results route gives the same lines.
  const results = (await (await fetch(`${base}/v1/batches/${id}/results?format=jsonl`, { headers })).text()).trim().split("\n");
  expect(results).toEqual(read);
  return early;
}

describe("results while running (embedded mode)", () => {
  let svc: TestService;
  let dir = "";
  let auth: Record<string, Record<string, string>> = {};
  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "obi-output-"));
    const keys = writeKeysFile(dir, [{ id: "alice" }, { id: "bob" }, { id: "ops", admin: true }]);
    auth = keys.auth;
    svc = await startTestService({ SEQUENCES: "2", KEYS_FILE: keys.file });
  }, 120_000);
  afterAll(async () => {
    await svc?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("streams the committed lines after a line, by limit, to the batch's own key only (an admin is told it may not); refuses bad reads", async () => {
    // Its checks read a finished batch: a short one does.
    const id = await start(svc.baseUrl, "own", auth.alice, READ_LINES);
    const base = svc.baseUrl;
    const h = (who: string) => ({ headers: auth[who] });
    for (const [q, message] of [
      ["after=-1", /after must be 0 or more/],
      ["after=1.5", /after must be an integer/],
      ["after=x", /after must be an integer/],
      ["limit=0", /limit must be between 1 and/],
      ...["0x10", "1e2", "+3", "%201", ""].map((v) => [`after=${v}`, /after must be an integer, in decimal digits/] as const),
      ["limit=0b11", /limit must be an integer, in decimal digits/],
    ] as const) {
      const res = await fetch(`${base}/v1/batches/${id}/output?${q}`, h("alice"));
      expect(res.status, q).toBe(400);
      const { error } = (await res.json()) as any;
      expect(error).toMatchObject({ type: "invalid_request_error", param: q.split("=")[0] });
      expect(error.message).toMatch(message);
    }
    expect((await fetch(`${base}/v1/batches/${id}/output`, h("bob"))).status).toBe(404);
    expect((await fetch(`${base}/v1/batches/batch_00000000000000000000dead/output`, h("alice"))).status).toBe(404);
    const done = await waitForBatch(base, id, 180_000, auth.alice);
    expect(done.status).toBe("completed");
    const all = (await outputSince(base, id, 0, h("alice")))!;
    expect(all).toHaveLength(READ_LINES);
    // An admin reads another key's batch, not its results.
    const asAdmin = await fetch(`${base}/v1/batches/${id}/output`, h("ops"));
    expect(asAdmin.status).toBe(403);
    expect(((await asAdmin.json()) as { error: { code: string } }).error.code).toBe("insufficient_permissions");
    expect(await outputSince(base, id, 10, { ...h("alice"), limit: 5 })).toEqual(all.slice(10, 15));
    const res = await fetch(`${base}/v1/batches/${id}/output?after=${READ_LINES + 5}`, h("alice"));
    expect(res.headers.get("x-output-through")).toBe(String(READ_LINES + 5));
    expect(await res.text()).toBe("");
  }, 240_000);

  it("gives a running batch's lines before it ends, each once, in the output file's order", async () => {
    const id = await start(svc.baseUrl, "emb", auth.alice);
    expect(await follow(svc.baseUrl, id, "emb", { headers: auth.alice })).toBeGreaterThan(0);
  }, 300_000);
});

describe.each([
  ["memory", false],
  ["postgres", !POSTGRES_BIN],
] as const)("results while running (distributed mode on %s)", (on, skip) => {
  if (skip) {
    it.skip(`needs PostgreSQL: ${SKIP_POSTGRES_NOTE}`, () => {});
    return;
  }
  const nodes = apiAndWorker(on, COMMON, `ow-${on}`);
  it("interleaves the shards' lines as committed, through a worker's stop and a takeover", async () => {
    const { api, worker } = nodes;
    const id = await start(api.baseUrl, `d${on}`);
    const early = await follow(api.baseUrl, id, `d${on}`, {
      midway: async () => {
        // The worker stops without handing its shards back: another takes them over once their leases lapse.
        await nodes.another({ ROLE: "worker", WORKER_ID: `ow2-${on}`, WORKER_POOL: "dedicated" });
        await worker.close({ graceMs: 0 });
      },
    });
    expect(early).toBeGreaterThan(0);
    // The three shards ran at once: their lines are interleaved, not one shard after another.
    const shardOf = (l: string) => Math.floor(Number(JSON.parse(l).custom_id.split("-").at(-1)) / 100);
    expect(lastRead.some((l, i) => i > 0 && shardOf(l) < shardOf(lastRead[i - 1]))).toBe(true);
  }, 300_000);
});
