// A database outage as the processes of the distributed mode log it: said once when it starts and once when it ends,
// the requests refused meanwhile as warnings, and nothing said at start by the processes that do not lead.
import { afterAll, describe, expect, it } from "vitest";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../testkit/postgres.js";
import { type SharedState, startChild, startSharedState } from "../helpers/cluster.js";
import type { ServerProcess } from "../helpers/process.js";

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

const COMMON = { LEASE_SECONDS: "4", CHECKPOINT_SECONDS: "1", SEQUENCES: "4", CONTEXT_SIZE: "512" };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The process's JSON log lines. */
const lines = (p: ServerProcess): Array<{ level: number; msg?: string; res?: { statusCode?: number } }> =>
  p
    .output()
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l));
const said = (p: ServerProcess, text: string) => lines(p).filter((l) => l.msg?.includes(text));

describe.skipIf(!POSTGRES_BIN)("a database outage in the log", () => {
  let shared: SharedState | undefined;
  const children: ServerProcess[] = [];
  afterAll(async () => {
    for (const c of children) if (c.child.exitCode === null) c.child.kill("SIGKILL");
    await shared?.close();
  });

  it("is said once as it starts and once as it ends; refused requests are warnings; no process warns at start", async () => {
    shared = await startSharedState();
    const s = shared;
    // Started together, as a deployment starts them: one of them leads the maintenance, the others do not.
    const [api, other, worker] = await Promise.all(
      [{ ROLE: "api" }, { ROLE: "api" }, { ROLE: "worker" }].map((env) => startChild(s, { ...COMMON, ...env })),
    );
    children.push(api, other, worker);
    await sleep(3_000);
    for (const p of children) {
      expect(said(p, "maintenance tick failed"), p.output()).toEqual([]);
      // All on one machine: the API's open loopback and the worker's loopback address are said, and nothing else.
      const expected = (msg = "") => msg.startsWith("API_KEYS is not set") || msg.startsWith("this worker tells the API servers");
      expect(lines(p).filter((l) => l.level >= 40 && !expected(l.msg))).toEqual([]);
    }

    s.pg.stop();
    for (let i = 0; i < 20; i++) expect((await fetch(`${api.baseUrl}/v1/batches`)).status).toBe(503);
    // Several heartbeats fail meanwhile (one every LEASE_SECONDS / 3).
    await sleep(5_000);
    s.pg.start();
    await expect.poll(() => said(api, "the database answers again").length, { timeout: 20_000 }).toBe(1);
    await expect.poll(() => said(worker, "heartbeat works again").length, { timeout: 20_000 }).toBe(1);

    expect(said(api, "the database cannot be reached")).toHaveLength(1);
    expect(said(api, "the database cannot be reached")[0].level).toBe(40);
    const refused = lines(api).filter((l) => l.res?.statusCode === 503);
    expect(refused.length).toBeGreaterThanOrEqual(20);
    for (const l of refused) expect(l.level).toBe(40);
    expect(lines(api).filter((l) => l.level >= 50)).toEqual([]);
    // A beat whose row could not be written is not one that works again: the outage is said once.
    expect(said(worker, "heartbeat failed")).toHaveLength(1);
    expect(said(worker, "the database cannot be reached")).toHaveLength(1);
    // The maintenance's own outage is the leader's to say, once; the others only follow it and say nothing.
    const maintenanceSaid = children.map((p) => said(p, "maintenance tick failed").length);
    expect(maintenanceSaid.filter((n) => n > 1)).toEqual([]);
    expect(maintenanceSaid.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(1);
  }, 120_000);
});
