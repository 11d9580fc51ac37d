// A 50,000-line batch over three worker processes and an API server process, on real PostgreSQL and S3: accepted
// (uploaded, validated, every line counted) before any worker runs a line of it, each process's memory flat while it
// runs (the least heap in use over the run's quarters: no process holds the batch), each request once. How long the acceptance
// takes is the bench's to measure (`npm run bench -- --only scale`), not this test's.
import { readFileSync, rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../testkit/postgres.js";
import { completionJsonl } from "../../testkit/workload.js";
import { downloadResults, type SharedState, startChild, startSharedState } from "../helpers/cluster.js";
import { uploadJsonl } from "../helpers/http-batches.js";
import type { ServerProcess } from "../helpers/process.js";
import { openaiClient, waitForBatch } from "../helpers/service.js";

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

const N = 50_000;
/** V8's heap in use, as the process's /metrics says it (prom-client's default metrics). */
async function heapMb(baseUrl: string): Promise<number | undefined> {
  const text = await (await fetch(`${baseUrl}/metrics`, { signal: AbortSignal.timeout(2_000) })).text();
  const m = /^nodejs_heap_size_used_bytes(?:\{[^}]*\})? ([\d.e+]+)/m.exec(text);
  return m ? Number(m[1]) / 2 ** 20 : undefined;
}
const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;

describe.skipIf(!POSTGRES_BIN)("a 50,000-line batch over three workers", () => {
  let shared: SharedState;
  const procs: ServerProcess[] = [];
  const dirs: string[] = [];
  async function start(env: Record<string, string>) {
    const p = await startChild(shared, env, dirs);
    procs.push(p);
    return p;
  }

  beforeAll(async () => {
    shared = await startSharedState();
  }, 60_000);
  afterAll(async () => {
    for (const p of procs) if (p.child.exitCode === null) p.child.kill("SIGKILL");
    await shared?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }, 60_000);

  it("accepts the whole file before a worker runs a line of it and runs with every process's memory flat", async () => {
    const api = await start({ ROLE: "api", MAX_REQUESTS_PER_BATCH: String(N) });
    const workers = [];
    for (let i = 0; i < 3; i++)
      workers.push(await start({ ROLE: "worker", WORKER_ID: `scale-${i}`, WORKER_CAPACITY: "1", SEQUENCES: "8" }));
    // A first, smaller batch warms every process up (JIT, heap, pools), so what follows measures the steady state.
    const warm = await uploadJsonl(api.baseUrl, completionJsonl(6_000, { prefix: "w", maxTokens: 1 }));
    const warmed = await openaiClient(api).batches.create({
      input_file_id: warm.id,
      endpoint: "/v1/completions",
      completion_window: "24h",
    });
    expect((await waitForBatch(api.baseUrl, warmed.id, 120_000)).status).toBe("completed");
    const input = completionJsonl(N, { prefix: "s", maxTokens: 1 });
    const t0 = Date.now();
    const file = await uploadJsonl(api.baseUrl, input);
    const batch = await openaiClient(api).batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" });
    const acceptMs = Date.now() - t0;
    expect(batch.status).toBe("validating");
    expect(batch.request_counts?.total).toBe(N);
    // Accepted before it runs: the create answered with every line counted and none done, and the workers start the
    // batch only after it was created, so the acceptance waited on nothing a worker does.
    expect(batch.request_counts).toEqual({ completed: 0, failed: 0, total: N });
    expect(batch.in_progress_at ?? null).toBeNull();

    // Each process's resident set (the log's) and V8's heap in use (/metrics), every half second.
    const samples = new Map<number, { rss: number[]; heap: number[] }>();
    const sample = setInterval(() => {
      for (const p of procs) {
        const s = samples.get(p.child.pid!) ?? { rss: [], heap: [] };
        samples.set(p.child.pid!, s);
        try {
          s.rss.push(rssMb(p.child.pid!));
        } catch {
          // exited
        }
        heapMb(p.baseUrl).then(
          (mb) => mb !== undefined && s.heap.push(mb),
          () => undefined,
        );
      }
    }, 500);
    const done = await waitForBatch(api.baseUrl, batch.id, 300_000);
    clearInterval(sample);
    expect(done.status).toBe("completed");
    expect(done.request_counts).toEqual({ completed: N, failed: 0, total: N });
    expect(done.in_progress_at).toBeGreaterThanOrEqual(batch.created_at);
    const { output, ids } = await downloadResults(api, done);
    expect(output.length).toBe(N);
    expect(new Set(ids).size).toBe(N);

    // Flat: what a process holds live does not grow with the lines it ran. The least heap in use over a stretch is
    // what survived its collections: the last quarter's is no higher than the second quarter's plus 16 MB (a process
    // that kept the batch's lines would hold 25,000 more of them, tens of MB). The resident set, logged, is no measure
    // of it: it swung by 35 MB either way between two runs with nothing kept, as the heap grows toward its limit
    // and the allocator keeps pages. The first quarter is the ramp up (pools, caches).
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const quarter = (xs: number[], i: number) => xs.slice(Math.floor((xs.length * i) / 4), Math.floor((xs.length * (i + 1)) / 4));
    const per = [...samples.values()].map(({ rss, heap }) => ({
      rss: [median(quarter(rss, 1)), median(quarter(rss, 3))],
      heap: [Math.min(...quarter(heap, 1)), Math.min(...quarter(heap, 3))],
    }));
    const shown = (k: "rss" | "heap") => per.map((p) => `${p[k][0].toFixed(0)} -> ${p[k][1].toFixed(0)}`).join(", ");
    console.log(
      `50,000 lines: accepted in ${acceptMs} ms, ran in ${done.completed_at - done.in_progress_at} s; per process, second quarter -> last quarter (MB): least heap in use ${shown("heap")}; median RSS ${shown("rss")}`,
    );
    for (const { heap } of per) expect(heap[1]).toBeLessThan(heap[0] + 16);
    // Outside the heap (the engine's buffers, the allocator's pages), only a gross growth is told from the swing.
    for (const { rss } of per) expect(rss[1]).toBeLessThan(rss[0] + 128);
  }, 400_000);
});
