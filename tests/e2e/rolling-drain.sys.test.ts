// A rolling update as Kubernetes runs one: the old process gets SIGTERM while load balancers may still send it
// connections. It keeps serving for SHUTDOWN_DRAIN_SECONDS with /ready failing, so a client polling through the
// update sees no refused connection and no 5xx. The balancer here is the test's own: it sends each request to a
// process whose last /ready answered 200, checked every 200 ms, as a readiness probe and endpoints would.
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { testModelPath } from "../../testkit/model.js";
import { logLines } from "../helpers/http-batches.js";
import { type ServerProcess, startMain } from "../helpers/process.js";

const dirs: string[] = [];
const procs: ServerProcess[] = [];
afterAll(() => {
  for (const p of procs) p.child.kill("SIGKILL");
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const DRAIN_SECONDS = 2;

async function start(): Promise<ServerProcess> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "obi-rolling-"));
  dirs.push(dir);
  const p = await startMain(
    { BATCH_DIR: dir, MODEL_PATH: await testModelPath(), THREADS: "1", SHUTDOWN_DRAIN_SECONDS: String(DRAIN_SECONDS) },
    60_000,
  );
  procs.push(p);
  return p;
}

type Outcome = { at: number; status: number | string };
const get = (url: string): Promise<number | string> =>
  fetch(url, { signal: AbortSignal.timeout(5_000) }).then(
    async (r) => {
      await r.arrayBuffer();
      return r.status;
    },
    (err) => String(err?.cause?.code ?? err?.name ?? err),
  );

/** Polls `url` every 50 ms until stopped; every answer or failure with its time. */
function poller(url: () => string | null) {
  const seen: Outcome[] = [];
  let on = true;
  const done = (async () => {
    while (on) {
      const u = url();
      if (u) seen.push({ at: Date.now(), status: await get(u) });
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  return {
    seen,
    stop: async () => {
      on = false;
      await done;
    },
  };
}

describe("SIGTERM in a rolling update", () => {
  it("keeps serving through the drain with /ready at 503, then stops; the process exits 0", async () => {
    const s = await start();
    const health = poller(() => `${s.baseUrl}/health`);
    await new Promise((r) => setTimeout(r, 300));
    const signalled = Date.now();
    s.child.kill("SIGTERM");
    await new Promise((r) => setTimeout(r, 200));
    const ready = await fetch(`${s.baseUrl}/ready`);
    expect(ready.status).toBe(503);
    expect(ready.headers.get("retry-after")).toBe("1");
    expect((await ready.json()).error.code).toBe("shutting_down");
    expect(await s.exited).toBe(0);
    // The poller may be between requests when the process exits: let it ask at least twice more.
    const exitedAt = Date.now();
    const afterExit = () => health.seen.filter((o) => o.at > exitedAt);
    for (let i = 0; i < 100 && afterExit().length < 2; i++) await new Promise((r) => setTimeout(r, 50));
    await health.stop();
    const during = health.seen.filter((o) => o.at < signalled + DRAIN_SECONDS * 1000 - 250);
    expect(during.filter((o) => o.at >= signalled).length).toBeGreaterThan(20);
    expect(during.filter((o) => o.status !== 200)).toEqual([]);
    // After the drain the process refuses, as before.
    expect(afterExit().length).toBeGreaterThanOrEqual(2);
    expect(afterExit().map((o) => o.status)).toEqual(afterExit().map(() => "ECONNREFUSED"));
    const msgs = logLines(s.output()).map((l) => l.msg);
    expect(msgs.findIndex((m) => /^draining/.test(m))).toBeLessThan(msgs.findIndex((m) => /^shutting down/.test(m)));
    expect(msgs).toContain("shutdown complete");
  }, 90_000);

  it("a client polling through a balancer while the old process is replaced sees no refused connection and no 5xx", async () => {
    const old = await start();
    const ready = new Map<string, boolean>([[old.baseUrl, true]]);
    const check = setInterval(() => {
      for (const url of ready.keys()) void get(`${url}/ready`).then((st) => ready.set(url, st === 200));
    }, 200);
    const balancer = http.createServer((req, res) => {
      const target = [...ready].find(([, ok]) => ok)?.[0];
      if (!target) return void res.writeHead(502).end();
      fetch(`${target}${req.url}`).then(
        async (r) =>
          res.writeHead(r.status, { "content-type": r.headers.get("content-type") ?? "" }).end(Buffer.from(await r.arrayBuffer())),
        () => res.writeHead(502).end(),
      );
    });
    await new Promise<void>((r) => balancer.listen(0, "127.0.0.1", () => r()));
    const front = `http://127.0.0.1:${(balancer.address() as AddressInfo).port}`;
    try {
      const client = poller(() => `${front}/v1/models`);
      // The new process comes up first (maxUnavailable 0), then the old one is told to stop.
      const next = await start();
      ready.set(next.baseUrl, false);
      await new Promise((r) => setTimeout(r, 500));
      old.child.kill("SIGTERM");
      expect(await old.exited).toBe(0);
      await new Promise((r) => setTimeout(r, 500));
      await client.stop();
      expect(client.seen.length).toBeGreaterThan(40);
      expect(client.seen.filter((o) => o.status !== 200)).toEqual([]);
    } finally {
      clearInterval(check);
      balancer.close();
    }
  }, 120_000);
});
