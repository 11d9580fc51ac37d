// The distributed mode's own cost: an API server process and 1 or 3 worker processes on a throwaway
// PostgreSQL and an S3 protocol server, serving a model whose upstream answers at once (a stub on loopback), so
// what is timed is the service: the CPU every service process spends per request, and requests/s through 1 vs 3
// workers. Then the shard claim rate PostgreSQL sustains (claim + finish, 8 claimers).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import pino from "pino";
import { PgBatchRecords } from "../postgres/batches.js";
import { createPool, migrate } from "../postgres/db.js";
import { PgWorkQueue } from "../postgres/shards.js";
import { PgWorkerRegistry } from "../postgres/workers.js";
import { startSharedState } from "../testkit/shared-state.js";
import { completionLines, prompt, writeBatchFile } from "../testkit/workload.js";
import { type BenchServer, startServer } from "./server.js";
import { batchEnd, createBatch, uploadFile } from "./timed-batches.js";

export interface DistributedRun {
  workers: number;
  seconds: number;
  requestsPerSecond: number;
  /** CPU (user + system) of every service process during the batch, per request. */
  cpuMsPerRequest: number;
}

export interface DistributedResult {
  requests: number;
  shardSize: number;
  runs: DistributedRun[];
  claims: { shards: number; claimers: number; perSecond: number };
}

const TICKS_PER_SECOND = 100;
/** utime + stime of a process, in ms (Linux /proc). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return ((Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND) * 1000;
}

/** An OpenAI-compatible upstream that answers every completion at once. */
async function instantUpstream(): Promise<{ baseUrl: string; close(): Promise<void> }> {
  const body = JSON.stringify({
    id: "cmpl-bench",
    object: "text_completion",
    created: 0,
    model: "m",
    choices: [{ index: 0, text: " ok", finish_reason: "length", logprobs: null }],
    usage: { prompt_tokens: 8, completion_tokens: 1, total_tokens: 9 },
  });
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) }).end(body));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { baseUrl: `http://127.0.0.1:${port}/v1`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

export async function measureDistributed(
  opts: { requests: number; shardSize: number; workerCounts: number[]; claimShards: number },
  log: (line: string) => void,
): Promise<DistributedResult> {
  const shared = await startSharedState();
  const upstream = await instantUpstream();
  const dir = mkdtempSync(path.join(os.tmpdir(), "obi-bench-dist-"));
  try {
    const modelsFile = path.join(dir, "models.yaml");
    writeFileSync(
      modelsFile,
      `models:\n  - { name: instant, upstream: { base_urls: ["${upstream.baseUrl}"], model: m, max_in_flight: 64 } }\n`,
    );
    const lines = completionLines(opts.requests, { maxTokens: 1, prompt }).map((l) => ({ ...l, body: { ...l.body, model: "instant" } }));
    const input = path.join(dir, "input.jsonl");
    const warm = path.join(dir, "warm.jsonl");
    await writeBatchFile(input, lines);
    await writeBatchFile(warm, lines.slice(0, Math.min(2_000, lines.length)));
    const env = {
      ...shared.env,
      MODELS_FILE: modelsFile,
      SHARD_SIZE: String(opts.shardSize),
      MAX_REQUESTS_PER_BATCH: String(opts.requests),
    };
    const runs: DistributedRun[] = [];
    for (const workers of opts.workerCounts) {
      const nodes: BenchServer[] = [await startServer("", { ...env, ROLE: "api" })];
      for (let i = 0; i < workers; i++) nodes.push(await startServer("", { ...env, ROLE: "worker", WORKER_ID: `bench-${workers}-${i}` }));
      try {
        const api = nodes[0].baseUrl;
        await batchEnd(api, (await createBatch(api, await uploadFile(api, warm))).id, { everyMs: 25 });
        const fileId = await uploadFile(api, input);
        const cpu0 = nodes.reduce((n, s) => n + cpuMs(s.pid), 0);
        const t0 = performance.now();
        const b = await batchEnd(api, (await createBatch(api, fileId)).id, { everyMs: 25 });
        const seconds = (performance.now() - t0) / 1000;
        const cpu = nodes.reduce((n, s) => n + cpuMs(s.pid), 0) - cpu0;
        if (b.status !== "completed" || b.request_counts.completed !== opts.requests)
          throw new Error(`batch ended ${b.status} ${JSON.stringify(b.request_counts)}`);
        const run = { workers, seconds, requestsPerSecond: opts.requests / seconds, cpuMsPerRequest: cpu / opts.requests };
        runs.push(run);
        log(
          `  ${workers} worker(s): ${opts.requests} requests in ${seconds.toFixed(2)} s = ${run.requestsPerSecond.toFixed(0)} requests/s; service CPU ${run.cpuMsPerRequest.toFixed(3)} ms per request`,
        );
      } finally {
        for (const s of nodes) await s.stop();
      }
    }
    const claims = await claimRate(shared.pg.url, opts.claimShards, 8);
    log(`  shard claims: ${claims.perSecond.toFixed(0)} per second (claim + finish, ${claims.claimers} claimers, ${claims.shards} shards)`);
    return { requests: opts.requests, shardSize: opts.shardSize, runs, claims };
  } finally {
    await upstream.close();
    await shared.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * `claimers` registered workers looping: claim one shard, mark it finished, over one batch of `shards` shards.
 */
async function claimRate(url: string, shards: number, claimers: number): Promise<DistributedResult["claims"]> {
  const logger = pino({ level: "silent" });
  const db = createPool(url, logger, claimers + 2);
  try {
    await migrate(db, logger);
    const now = Math.floor(Date.now() / 1000);
    const id = `batch_${"c".repeat(24)}`;
    const batch = { id, status: "validating", model: "instant", submitted_at: now, deadline_at: now + 86_400, endpoint: "/v1/completions" };
    const plan = Array.from({ length: shards }, (_, i) => ({ byteStart: i, byteEnd: i + 1, total: 1 }));
    await new PgBatchRecords(db).insert({ batch: batch as never, owner: null, inputKey: "unused", shards: plan });
    const queue = new PgWorkQueue(db);
    // Registered, as real workers are: each claim then also weighs the fairness rule against its peers.
    const workers = new PgWorkerRegistry(db);
    for (let w = 0; w < claimers; w++)
      await workers.register({ id: `claimer-${w}`, pool: "dedicated", capacity: 4, models: ["instant"], running: [] });
    let done = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: claimers }, async (_, w) => {
        for (;;) {
          const [s] = await queue.claim({
            workerId: `claimer-${w}`,
            pool: "dedicated",
            models: ["instant"],
            limit: 1,
            leaseSeconds: 30,
            urgentSeconds: 600,
            now,
          });
          if (!s) return;
          await queue.finish(s);
          done++;
        }
      }),
    );
    return { shards: done, claimers, perSecond: done / ((performance.now() - t0) / 1000) };
  } finally {
    await db.end();
  }
}
