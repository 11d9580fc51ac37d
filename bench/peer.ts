// The service at its defaults against llama.cpp's own llama-server at its best configuration, on the same
// requests: uniform generations, a mixed workload (chat and completions, short and long prompts and answers),
// prompt-heavy classification (long prompts, 1-token answers), embeddings, and reranking (on the generated
// reranker, llama-server with --reranking). The service's clock runs from
// the upload to `completed` (every batch of the workload, polled at 40 Hz once its results are on disk: see
// waitForTimedBatch), the peer's from its first request to its last answer;
// each has had one small warm-up (a request; a 4-line batch) after its start.
import path from "node:path";
import { type PeerRequest, type PeerRun, sweepPeer } from "../testkit/llama-server.js";
import { completionLines, prompt, writeBatchFile } from "../testkit/workload.js";
import { engineBuild, startServer } from "./server.js";
import { batchEnd, createBatch, uploadFile, waitForTimedBatch } from "./timed-batches.js";

export type WorkloadName =
  | "uniform"
  | "mixed"
  | "prompt-heavy"
  | "embeddings"
  | "rerank"
  | "template"
  | "varied"
  | "retrieval"
  | `families-${number}`;

export interface Workload {
  name: WorkloadName;
  what: string;
  requests: PeerRequest[];
  /** llama-server's context per slot: the longest request fits. */
  ctxPerSlot: number;
}

export interface PeerComparison {
  model: string;
  workload: WorkloadName;
  what: string;
  peer: PeerRun[];
  best: PeerRun;
  service: ServiceRun;
  /** llama-server's best seconds / the service's seconds: >= 1 means the service is at least as fast. */
  ratio: number;
}

export const SENTENCES = [
  "The little dog ran across the green field to find his red ball.",
  "Mom made a big cake with apples and cream for the party.",
  "The sun was warm and the birds sang in the tall old tree.",
  "Tim and Sue built a boat out of a box and sailed it on the pond.",
  "A small cat slept on the soft blue rug next to the fire.",
];
const sentences = (n: number, i: number) => Array.from({ length: n }, (_, k) => SENTENCES[(i + k) % SENTENCES.length]).join(" ");

export function uniformWorkload(requests: number, tokens: number): Workload {
  return {
    name: "uniform",
    what: `${requests} completions x ${tokens} tokens`,
    requests: completionLines(requests, { maxTokens: tokens, prompt }).map((l) => ({ url: l.url, body: l.body })),
    ctxPerSlot: 256,
  };
}

/** 128 requests, half chat, half completions; prompts of 1 to 20 sentences, max_tokens 16 to 128 (seeded by index). */
export function mixedWorkload(): Workload {
  const requests: PeerRequest[] = Array.from({ length: 128 }, (_, i) => {
    const text = `${sentences(1 + ((i * 7) % 20), i)} ${prompt(i)}`;
    const max_tokens = 16 + ((i * 37) % 113);
    return i % 2
      ? { url: "/v1/chat/completions", body: { messages: [{ role: "user", content: text }], max_tokens, temperature: 0 } }
      : { url: "/v1/completions", body: { prompt: text, max_tokens, temperature: 0 } };
  });
  return { name: "mixed", what: "128 requests: chat + completions, 1-20 sentences, 16-128 tokens", requests, ctxPerSlot: 1024 };
}

/** Classification-style: one shared instruction, then a different text per request (~300 tokens in all), one token of answer. */
export function promptHeavyWorkload(requests: number): Workload {
  const instruction = "Read the story and say whether it is happy. Answer yes or no.";
  return {
    name: "prompt-heavy",
    what: `${requests} completions, ~300-token prompts (a shared instruction, a different story each), 1-token answers`,
    requests: Array.from({ length: requests }, (_, i) => ({
      url: "/v1/completions" as const,
      body: { prompt: `${instruction}\nStory: ${prompt(i)}${story(i)}\nHappy:`, max_tokens: 1, temperature: 0 },
    })),
    ctxPerSlot: 1024,
  };
}

/** Eight sentences in an order that differs from one request to the next. */
function story(i: number): string {
  return Array.from({ length: 8 }, (_, k) => SENTENCES[(i * (k + 3) + k * k) % SENTENCES.length]).join(" ");
}

export function embeddingsWorkload(inputs: number): Workload {
  return {
    name: "embeddings",
    what: `${inputs} embedding inputs`,
    requests: Array.from({ length: inputs }, (_, i) => ({
      url: "/v1/embeddings" as const,
      body: { input: `${sentences(1 + (i % 4), i)} ${prompt(i)}` },
    })),
    ctxPerSlot: 256,
  };
}

/** `lines` rerank requests, each a query against 8 candidate documents (as retrieval re-orders its candidates). */
export function rerankWorkload(lines: number): Workload {
  return {
    name: "rerank",
    what: `${lines} rerank lines of 8 documents`,
    requests: Array.from({ length: lines }, (_, i) => ({
      url: "/v1/rerank" as const,
      body: {
        query: `Which passage tells of ${prompt(i)}?`,
        documents: Array.from({ length: 8 }, (_, k) => sentences(1 + (k % 3), i * 8 + k)),
      },
    })),
    ctxPerSlot: 256,
  };
}

export type ServiceRun = {
  seconds: number;
  generated: number;
  promptTokens: number;
  cachedTokens: number;
  /** The local engine's node-llama-cpp build as /ready reports it (absent for an upstream model). */
  build?: string;
};

/**
 * The workload through the service at its defaults: one batch per endpoint, submitted together. Best of
 * `repeats` runs, as llama-server's figure is the best of its sweep (this machine is noisy); each run on a fresh
 * server, so no run finds the last one's prompts in its cache (llama-server starts afresh per configuration too).
 */
export async function runService(modelPath: string, w: Workload, repeats: number, env: Record<string, string> = {}): Promise<ServiceRun> {
  let best: ServiceRun | undefined;
  for (let r = 0; r < repeats; r++) {
    const run = await runServiceOnce(modelPath, w, env);
    if (!best || run.seconds < best.seconds) best = run;
  }
  return best!;
}

async function runServiceOnce(modelPath: string, w: Workload, env: Record<string, string>): Promise<ServiceRun> {
  // The defaults are what is compared; BENCH_SERVICE_ENV (JSON) sets variables for experiments.
  const server = await startServer(modelPath, { ...JSON.parse(process.env.BENCH_SERVICE_ENV ?? "{}"), ...env });
  try {
    const byUrl = new Map<string, object[]>();
    w.requests.forEach((r, i) => {
      const list = byUrl.get(r.url) ?? [];
      list.push({ custom_id: `r-${i}`, method: "POST", url: r.url, body: r.body });
      byUrl.set(r.url, list);
    });
    const files = [...byUrl].map(([url, lines], k) => ({ url, file: path.join(server.batchDir, `peer-${k}.jsonl`), lines }));
    for (const f of files) await writeBatchFile(f.file, f.lines);
    // As llama-server gets a request before its clock starts, the service gets a small batch first (4 lines of
    // the workload: its prompts are cached from then on, as the warm-up request's are in llama-server).
    const warm = path.join(server.batchDir, "peer-warm.jsonl");
    await writeBatchFile(warm, files[0].lines.slice(0, 4));
    await batchEnd(server.baseUrl, (await createBatch(server.baseUrl, await uploadFile(server.baseUrl, warm), files[0].url)).id, {
      everyMs: 25,
    });
    const t0 = performance.now();
    const ids = await Promise.all(
      files.map(async (f) => (await createBatch(server.baseUrl, await uploadFile(server.baseUrl, f.file), f.url)).id),
    );
    const ends = await Promise.all(
      ids.map((id, k) =>
        waitForTimedBatch(server.baseUrl, id, 25, { folder: path.join(server.batchDir, id), lines: files[k].lines.length }),
      ),
    );
    const batches = ends.map((e) => e.batch);
    const seconds = (Math.max(...ends.map((e) => e.seenAt)) - t0) / 1000;
    for (const b of batches)
      if (b.status !== "completed" || b.request_counts.failed > 0)
        throw new Error(`service batch ${b.id} ended ${b.status} ${JSON.stringify(b.request_counts)}`);
    return {
      seconds,
      build: await engineBuild(server.baseUrl),
      generated: batches.reduce((s, b) => s + (b.usage?.output_tokens ?? 0), 0),
      promptTokens: batches.reduce((s, b) => s + (b.usage?.input_tokens ?? 0), 0),
      cachedTokens: batches.reduce((s, b) => s + (b.usage?.input_tokens_details?.cached_tokens ?? 0), 0),
    };
  } finally {
    await server.stop();
  }
}

export async function comparePeer(
  binary: string,
  model: string,
  modelPath: string,
  w: Workload,
  grid: { parallel: number[]; threads: number[] },
  log: (line: string) => void,
  repeats = 1,
): Promise<PeerComparison> {
  log(`\n${model}, ${w.name} (${w.what}): llama-server swept, then the service at its defaults`);
  const { runs, best } = await sweepPeer(
    binary,
    modelPath,
    w.requests,
    { ...grid, ctxPerSlot: w.ctxPerSlot, embeddings: w.name === "embeddings", reranking: w.name === "rerank" },
    log,
  );
  const service = await runService(modelPath, w, repeats);
  const ratio = best.seconds / service.seconds;
  log(
    `  service (best of ${repeats}): ${service.seconds.toFixed(2)} s (${service.generated} tokens) vs llama-server best ${best.seconds.toFixed(2)} s: ${ratio.toFixed(2)}x`,
  );
  return { model, workload: w.name, what: w.what, peer: runs, best, service, ratio };
}
