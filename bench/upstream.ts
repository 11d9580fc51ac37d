// The throughput goal: the service in front of a healthy llama-server (an upstream model, the adaptive
// limit finding its concurrency) against a client that sends the same requests straight to llama-server with
// the best fixed concurrency of a sweep. Both get a warm-up; the service's clock runs from the upload to
// `completed`, the client's from its first request to its last answer. Rounds alternate between the two; the
// client keeps its best per concurrency, the service its best batch (two per round, each round a fresh server).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { drive, startLlamaServer } from "../testkit/llama-server.js";
import { completionLines, prompt, writeBatchFile } from "../testkit/workload.js";
import { startServer } from "./server.js";
import { batchEnd, createBatch, uploadFile } from "./timed-batches.js";

export interface UpstreamComparison {
  model: string;
  requests: number;
  tokens: number;
  llamaServer: { parallel: number; threads: number };
  clients: Array<{ concurrency: number; seconds: number }>;
  bestClient: { concurrency: number; seconds: number };
  service: { seconds: number; limitAtEnd: number | null };
  /** The best client's seconds / the service's: >= 0.95 is the goal. */
  ratio: number;
}

export async function compareUpstream(
  binary: string,
  model: string,
  modelPath: string,
  opts: { requests: number; tokens: number; parallel: number; threads: number; concurrencies: number[]; repeats: number },
  log: (line: string) => void,
): Promise<UpstreamComparison> {
  log(`\n${model}: ${opts.requests} x ${opts.tokens} tokens through llama-server (-np ${opts.parallel} -t ${opts.threads})`);
  const upstream = await startLlamaServer(binary, modelPath, { parallel: opts.parallel, threads: opts.threads, ctxPerSlot: 256 });
  const dir = mkdtempSync(path.join(os.tmpdir(), "obi-bench-upstream-"));
  try {
    const lines = completionLines(opts.requests, { maxTokens: opts.tokens, prompt }).map((l) => ({
      ...l,
      body: { ...l.body, model: "remote" },
    }));
    const requests = lines.map((l) => ({ url: l.url, body: l.body }));
    await drive(upstream.baseUrl, requests.slice(0, 8), 8);
    const modelsFile = path.join(dir, "models.yaml");
    writeFileSync(modelsFile, `models:\n  - { name: remote, upstream: { base_urls: ["${upstream.baseUrl}/v1"], model: m } }\n`);
    const input = path.join(dir, "input.jsonl");
    const warm = path.join(dir, "warm.jsonl");
    await writeBatchFile(input, lines);
    // The warm-up batch (a quarter of the workload) lets the service's adaptive limit has
    // find its level (as it has in a service that has run before) and warms the JIT, as the client is warm.
    await writeBatchFile(warm, lines.slice(0, 256));

    // Rounds alternate (every client concurrency, then the service on a fresh server), so drift on this noisy
    // machine, and llama-server's own prompt cache warming, fall on both; each keeps its best.
    const best = new Map<number, number>();
    let service: UpstreamComparison["service"] | undefined;
    for (let r = 0; r < opts.repeats; r++) {
      for (const concurrency of opts.concurrencies) {
        const seconds = (await drive(upstream.baseUrl, requests, concurrency)).seconds;
        best.set(concurrency, Math.min(best.get(concurrency) ?? Number.POSITIVE_INFINITY, seconds));
        log(`  client, ${concurrency} in flight: ${seconds.toFixed(2)} s`);
      }
      const run = await runService(modelsFile, warm, input);
      log(`  service (adaptive limit ${run.limitAtEnd ?? "?"} at the end): ${run.seconds.toFixed(2)} s`);
      if (!service || run.seconds < service.seconds) service = run;
    }
    const clients = opts.concurrencies.map((concurrency) => ({ concurrency, seconds: best.get(concurrency)! }));
    const bestClient = clients.reduce((a, b) => (b.seconds < a.seconds ? b : a));
    const ratio = bestClient.seconds / service!.seconds;
    log(
      `  best client (${bestClient.concurrency} in flight) ${bestClient.seconds.toFixed(2)} s vs service ${service!.seconds.toFixed(2)} s: ${ratio.toFixed(2)}x`,
    );
    return {
      model,
      requests: opts.requests,
      tokens: opts.tokens,
      llamaServer: { parallel: opts.parallel, threads: opts.threads },
      clients,
      bestClient,
      service: service!,
      ratio,
    };
  } finally {
    await upstream.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A fresh server: the warm-up batch, then the workload twice (a service runs batch after batch); the faster counts. */
async function runService(modelsFile: string, warm: string, input: string): Promise<UpstreamComparison["service"]> {
  const server = await startServer("", { MODELS_FILE: modelsFile });
  try {
    await batchEnd(server.baseUrl, (await createBatch(server.baseUrl, await uploadFile(server.baseUrl, warm))).id, { everyMs: 25 });
    let best = Number.POSITIVE_INFINITY;
    for (let i = 0; i < 2; i++) {
      const t0 = performance.now();
      const b = await batchEnd(server.baseUrl, (await createBatch(server.baseUrl, await uploadFile(server.baseUrl, input))).id, {
        everyMs: 25,
      });
      if (b.status !== "completed" || b.request_counts.failed > 0)
        throw new Error(`service batch ended ${b.status} ${JSON.stringify(b.request_counts)}`);
      best = Math.min(best, (performance.now() - t0) / 1000);
    }
    const limit = /obi_backend_limit\{model="remote"\} (\d+)/.exec(await (await fetch(`${server.baseUrl}/metrics`)).text());
    return { seconds: best, limitAtEnd: limit ? Number(limit[1]) : null };
  } finally {
    await server.stop();
  }
}
