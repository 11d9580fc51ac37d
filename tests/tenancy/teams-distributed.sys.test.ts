// Many keys on the distributed mode (PostgreSQL + S3), through real server processes sharing one keys file: the
// enqueued-token reservation raced by two API servers, its release after kill -9 of the API server that made it and
// of the worker running it, fair shares between keys across two workers, usage that adds up to the batches', and a
// key's file storage bound counted across API servers.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../testkit/postgres.js";
import { completionJsonl } from "../../testkit/workload.js";
import { type SharedState, startChild, startNode, startSharedState, type TestNode } from "../helpers/cluster.js";
import { createBatch, getBatch, isFinal, pollBatch, uploadJsonl } from "../helpers/http-batches.js";
import { getJson, usageByKey, usageOf, writeKeysFile } from "../helpers/keys.js";
import type { ServerProcess } from "../helpers/process.js";

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

const COMMON = { SHARD_SIZE: "40", CHECKPOINT_SECONDS: "1", LEASE_SECONDS: "4", SEQUENCES: "4", CONTEXT_SIZE: "512" };

describe.skipIf(!POSTGRES_BIN)("many keys on the distributed mode", () => {
  let shared: SharedState;
  const children: ServerProcess[] = [];
  const keysDir = mkdtempSync(path.join(os.tmpdir(), "obi-keys-"));
  const { file, auth } = writeKeysFile(keysDir, [
    { id: "ops", admin: true },
    { id: "team-a", limits: { "*": 10_000 } },
    { id: "team-b" },
    { id: "team-c" },
    { id: "team-d", fileStorageBytes: 3_000 },
  ]);
  const began = Math.floor(Date.now() / 1000) - 5;
  let apiA: ServerProcess;
  const nodes: TestNode[] = [];
  const workerChildren: ServerProcess[] = [];
  let apiB: ServerProcess;

  async function child(env: Record<string, string>): Promise<ServerProcess> {
    const p = await startChild(shared, { ...COMMON, KEYS_FILE: file, ...env });
    children.push(p);
    return p;
  }
  async function kill9(p: ServerProcess) {
    p.child.kill("SIGKILL");
    await p.exited;
  }
  async function upload(base: string, key: string, n: number, maxTokens: number, tag: string) {
    return (await uploadJsonl(base, completionJsonl(n, { prefix: tag, maxTokens, temperature: 1 }), auth[key])).id;
  }
  const final = (base: string, key: string, id: string) => pollBatch(base, id, isFinal, 150_000, auth[key]);
  const enqueued = async (key: string) => {
    const { body } = await getJson(apiB.baseUrl, `/v1/organization/api_keys/${key}`, auth.ops);
    return Object.values(body.enqueued_tokens as Record<string, number>).reduce((n, t) => n + t, 0);
  };

  beforeAll(async () => {
    shared = await startSharedState();
    [apiA, apiB] = await Promise.all([child({ ROLE: "api" }), child({ ROLE: "api" })]);
  }, 120_000);

  afterAll(async () => {
    for (const n of nodes) await n.close({ graceMs: 0 });
    for (const c of children) if (c.child.exitCode === null && c.child.signalCode === null) await kill9(c);
    await shared?.close();
    rmSync(keysDir, { recursive: true, force: true });
  }, 60_000);

  it("admits a key's concurrent creates on two API servers up to its limit, and fails the rest with token_limit_exceeded", async () => {
    const input = await upload(apiA.baseUrl, "team-a", 40, 100, "race");
    const created = await Promise.all(
      Array.from({ length: 8 }, (_, i) => createBatch(i % 2 ? apiB.baseUrl : apiA.baseUrl, input, auth["team-a"])),
    );
    expect(created.every((c) => c.status === 200)).toBe(true);
    const admitted = created.filter((c) => c.body.status === "validating");
    const refused = created.filter((c) => c.body.status === "failed");
    expect(admitted).toHaveLength(2);
    expect(refused).toHaveLength(6);
    for (const r of refused) expect(r.body.errors.data[0].code).toBe("token_limit_exceeded");
    expect(await enqueued("team-a")).toBeLessThanOrEqual(10_000);
    expect((await getJson(apiA.baseUrl, `/v1/organization/usage/completions?start_time=${began}`, auth["team-a"])).status).toBe(403);
  }, 60_000);

  it("releases the reservation after kill -9 of the API server that made it and of the worker running it", async () => {
    const held = (await getJson(apiB.baseUrl, "/v1/batches?limit=20", auth["team-a"])).body.data.filter((b: any) => !isFinal(b));
    expect(held).toHaveLength(2);
    await kill9(apiA);
    const first = await child({ ROLE: "worker", WORKER_ID: "w1", WORKER_CAPACITY: "1" });
    workerChildren.push(first);
    for (const b of held) expect((await final(apiB.baseUrl, "team-a", b.id)).status).toBe("completed");
    expect(await enqueued("team-a")).toBe(0);
    // A long batch (team-b's, with no limit: its tokens are counted all the same), its worker killed mid-run:
    // another worker finishes it after the lease, and its tokens come back. 400 lines: mid-run however fast the model.
    const long = (await createBatch(apiB.baseUrl, await upload(apiB.baseUrl, "team-b", 400, 50, "long"), auth["team-b"])).body;
    expect(long.status).toBe("validating");
    await pollBatch(apiB.baseUrl, long.id, (b) => b.request_counts.completed >= 1, 60_000, auth["team-b"]);
    await kill9(first);
    expect(isFinal(await getBatch(apiB.baseUrl, long.id, auth["team-b"]))).toBe(false);
    expect(await enqueued("team-b")).toBeGreaterThan(20_000);
    workerChildren.push(await child({ ROLE: "worker", WORKER_ID: "w2", WORKER_CAPACITY: "1" }));
    expect((await final(apiB.baseUrl, "team-b", long.id)).status).toBe("completed");
    expect(await enqueued("team-b")).toBe(0);
  }, 240_000);

  it("starts a key's one batch within a shard of another key's queue across two workers", async () => {
    for (const c of workerChildren) if (c.child.exitCode === null && c.child.signalCode === null) await kill9(c);
    // The other key's queue is made while no worker runs, so it is a queue when the one comes however fast the
    // machine runs the lines; then the workers start (in this process, so that the order their engines start the
    // lines in can be read), and the one comes once they are at work.
    const many: Array<{ id: string; tag: string }> = [];
    for (let i = 0; i < 12; i++) {
      const input = await upload(apiB.baseUrl, "team-c", 4, 48, `m${i}`);
      many.push({ id: (await createBatch(apiB.baseUrl, input, auth["team-c"])).body.id, tag: `m${i}` });
    }
    const workers = [
      await startNode(shared, { ...COMMON, ROLE: "worker", KEYS_FILE: file, WORKER_ID: "n1", WORKER_CAPACITY: "1" }),
      await startNode(shared, { ...COMMON, ROLE: "worker", KEYS_FILE: file, WORKER_ID: "n2", WORKER_CAPACITY: "1" }),
    ];
    nodes.push(...workers);
    const firstCall = (tag: string) => {
      const at = workers.flatMap((w) => w.calls.at.filter((_, i) => w.calls.bodies[i].includes(`story ${tag} `)));
      return at.length > 0 ? Math.min(...at) : Number.POSITIVE_INFINITY;
    };
    await expect.poll(() => many.filter((m) => firstCall(m.tag) < Number.POSITIVE_INFINITY).length, { timeout: 60_000 }).toBeGreaterThan(0);
    const oneInput = await upload(apiB.baseUrl, "team-b", 2, 16, "one");
    const cameAt = Date.now();
    const one = (await createBatch(apiB.baseUrl, oneInput, auth["team-b"])).body;
    // Its create answered: from here it is in the queue. On a loaded machine the create itself took long enough for
    // each worker to start another of the other key's batches, which says nothing of the order of the queue.
    const queuedAt = Date.now();
    expect((await final(apiB.baseUrl, "team-b", one.id)).status).toBe("completed");
    const startedBy = (t: number) => many.filter((m) => firstCall(m.tag) < t).length;
    expect(many.length - startedBy(cameAt)).toBeGreaterThanOrEqual(5);
    // Started before it: those running when it was queued, and at most one more per worker around the claim.
    expect(startedBy(firstCall("one")) - startedBy(queuedAt)).toBeLessThanOrEqual(2);
    for (const m of many) await fetch(`${apiB.baseUrl}/v1/batches/${m.id}/cancel`, { method: "POST", headers: auth["team-c"] });
    for (const m of many) await final(apiB.baseUrl, "team-c", m.id);
  }, 240_000);

  it("reports usage per key that adds up exactly to the batches' usage", async () => {
    const page = (
      await getJson(apiB.baseUrl, `/v1/organization/usage/completions?start_time=${began}&bucket_width=1h&group_by=api_key_id`, auth.ops)
    ).body;
    const reported = usageByKey(page);
    for (const key of ["team-a", "team-b", "team-c"]) {
      const mine = (await getJson(apiB.baseUrl, `/v1/batches?limit=100&api_key_id=${key}`, auth.ops)).body.data;
      expect(mine.every(isFinal)).toBe(true);
      expect(reported.get(key)).toEqual(usageOf(mine));
    }
    expect(reported.get("team-a")!.output).toBeGreaterThan(0);
  }, 60_000);

  it("bounds a key's stored file bytes across API servers, and gives a deleted file's back", async () => {
    const sized = (bytes: number) => `${JSON.stringify({ custom_id: "x", pad: "y".repeat(bytes - 27) })}\n`;
    const send = (base: string, bytes: number) =>
      fetch(`${base}/v1/files`, {
        method: "POST",
        headers: auth["team-d"],
        body: (() => {
          const form = new FormData();
          form.append("purpose", "batch");
          form.append("file", new Blob([sized(bytes)]), "in.jsonl");
          return form;
        })(),
      });
    // An API server of its own beside apiB: an earlier test killed apiA.
    const apiC = await child({ ROLE: "api" });
    const first = await (await send(apiC.baseUrl, 2_000)).json();
    expect(first.bytes).toBe(2_000);
    expect((await send(apiB.baseUrl, 1_000)).status).toBe(200);
    const refused = await send(apiC.baseUrl, 500);
    expect(refused.status).toBe(400);
    expect((await refused.json()).error).toMatchObject({ code: "storage_quota_exceeded", param: null });
    expect((await fetch(`${apiB.baseUrl}/v1/files/${first.id}`, { method: "DELETE", headers: auth["team-d"] })).status).toBe(200);
    expect((await send(apiC.baseUrl, 500)).status).toBe(200);
  }, 60_000);
});
