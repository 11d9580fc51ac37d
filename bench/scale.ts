// Targets 3 and 4: a batch file of `lines` 1-token requests through a server at its defaults. Upload plus
// validation time; the server's resident memory beyond what it held idle with the model loaded; listing and
// polling latency while the batch runs; and the control-plane cost per request against the engine alone.
import path from "node:path";
import { isFinal } from "../testkit/batch-client.js";
import { completionLines, prompt, writeBatchFile } from "../testkit/workload.js";
import { runChild } from "./child.js";
import type { ChildResult } from "./records.js";
import { sampleMemory, startServer } from "./server.js";
import { mib, percentile } from "./stats.js";
import { type Batch, createBatch, getBatch, uploadFile } from "./timed-batches.js";

export interface ScaleResult {
  lines: number;
  fileMiB: number;
  uploadMs: number;
  /** POST /v1/batches answers once the whole file is validated. */
  validateMs: number;
  runSeconds: number;
  requestsPerSecond: number;
  idleRssMiB: number;
  peakRssMiB: number;
  /** Peak during upload, validation and the run, minus the idle server with its model loaded (goal < 300). */
  rssGrowthMiB: number;
  poll: { requests: number; p50Ms: number; p95Ms: number; maxMs: number; byRoute: Record<string, { p50Ms: number; p95Ms: number }> };
  /** Per request: the service's run time over the requests, the engine-only time, and the difference (goal < 0.5 ms). */
  overhead: {
    serviceMsPerRequest: number;
    engineMsPerRequest: number;
    engineRequests: number;
    overheadMsPerRequest: number;
    engine: { threads: number; sequences: number; concurrency?: number };
  };
}

const POLL_ROUTES = ["/v1/batches?limit=20", "/v1/files?limit=20", "BATCH"] as const;

export async function measureScale(
  modelPath: string,
  lines: number,
  engineRequests: number,
  log: (l: string) => void,
): Promise<ScaleResult> {
  const server = await startServer(modelPath);
  try {
    await new Promise((r) => setTimeout(r, 500));
    const idle = server.memory()?.rss ?? NaN;
    const file = path.join(server.batchDir, "scale-input.jsonl");
    const bytes = await writeBatchFile(file, completionLines(lines, { maxTokens: 1, prompt }));
    const memory = sampleMemory(() => server.memory(), 50);

    const t0 = performance.now();
    const fileId = await uploadFile(server.baseUrl, file);
    const t1 = performance.now();
    const created = await createBatch(server.baseUrl, fileId);
    const t2 = performance.now();
    if (created.status === "failed") throw new Error(`validation failed: ${JSON.stringify(created.errors)}`);
    log(`  upload ${(t1 - t0).toFixed(0)} ms, validation ${(t2 - t1).toFixed(0)} ms for ${lines} lines`);

    const { batch, latencies } = await pollUntilFinal(server.baseUrl, created.id);
    const t3 = performance.now();
    const peak = memory.stop();
    if (batch.status !== "completed" || batch.request_counts.failed > 0)
      throw new Error(`scale batch ended ${batch.status}: ${JSON.stringify(batch.request_counts)}`);
    const runSeconds = (t3 - t2) / 1000;
    log(`  ran ${lines} requests in ${runSeconds.toFixed(1)} s; peak RSS ${mib(peak)} MiB (idle ${mib(idle)} MiB)`);

    const engineOnly = await runChild<ChildResult>("engine-probe.ts", {
      mode: "complete",
      model: modelPath,
      requests: engineRequests,
      tokens: 1,
    });
    const serviceMsPerRequest = (runSeconds * 1000) / lines;
    const engineMsPerRequest = (engineOnly.seconds * 1000) / engineRequests;
    log(`  per request: service ${serviceMsPerRequest.toFixed(3)} ms, engine alone ${engineMsPerRequest.toFixed(3)} ms`);

    const all = Object.values(latencies).flat();
    return {
      lines,
      fileMiB: bytes / 2 ** 20,
      uploadMs: t1 - t0,
      validateMs: t2 - t1,
      runSeconds,
      requestsPerSecond: lines / runSeconds,
      idleRssMiB: mib(idle)!,
      peakRssMiB: mib(peak)!,
      rssGrowthMiB: mib(peak - idle)!,
      poll: {
        requests: all.length,
        p50Ms: percentile(all, 50),
        p95Ms: percentile(all, 95),
        maxMs: Math.max(...all),
        byRoute: Object.fromEntries(Object.entries(latencies).map(([k, v]) => [k, { p50Ms: percentile(v, 50), p95Ms: percentile(v, 95) }])),
      },
      overhead: {
        serviceMsPerRequest,
        engineMsPerRequest,
        engineRequests,
        overheadMsPerRequest: serviceMsPerRequest - engineMsPerRequest,
        engine: { threads: engineOnly.threads, sequences: engineOnly.sequences, concurrency: engineOnly.concurrency },
      },
    };
  } finally {
    await server.stop();
  }
}

/** What a dashboard does while a batch runs: list batches, list files, read the batch, every 100 ms. */
async function pollUntilFinal(baseUrl: string, id: string): Promise<{ batch: Batch; latencies: Record<string, number[]> }> {
  const latencies: Record<string, number[]> = Object.fromEntries(POLL_ROUTES.map((r) => [r === "BATCH" ? "/v1/batches/{id}" : r, []]));
  for (;;) {
    for (const route of POLL_ROUTES) {
      const started = performance.now();
      if (route === "BATCH") {
        const batch = await getBatch(baseUrl, id);
        latencies["/v1/batches/{id}"].push(performance.now() - started);
        if (isFinal(batch)) return { batch, latencies };
      } else {
        const res = await fetch(baseUrl + route);
        await res.arrayBuffer();
        latencies[route].push(performance.now() - started);
      }
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
