// The performance peer: llama.cpp's own llama-server (built by scripts/build-llama-server.sh from the source
// node-llama-cpp ships), fed by a script that keeps as many requests in flight as the server has slots, or by the
// planned feed, which knows the whole batch ahead (the best feeding order, which the service's routing is held to).
// The clock runs from the first request sent to the last answer; the server's start-up is not counted.
import { execFileSync, spawn } from "node:child_process";
import path from "node:path";
import { familyKey, promptOpening } from "../openai/prompt-opening.js";
import { repoRoot } from "./repo-root.js";

export interface PeerConfig {
  parallel: number;
  threads: number;
  /** Context cells per slot (llama-server's -c is the total). */
  ctxPerSlot: number;
  embeddings?: boolean;
  /** Started with --reranking (a reranker GGUF): it answers /v1/rerank. */
  reranking?: boolean;
}

export interface PeerRequest {
  url: "/v1/completions" | "/v1/chat/completions" | "/v1/embeddings" | "/v1/rerank";
  body: Record<string, unknown>;
}

export interface PeerRun extends PeerConfig {
  seconds: number;
  requests: number;
  /** completion_tokens summed over the answers (0 for embeddings). */
  generated: number;
  promptTokens: number;
  /** Prompt tokens its prompt cache spared (prompt tokens less those its log says it evaluated); absent if unlogged. */
  cachedTokens?: number;
}

/** scripts/build-llama-server.sh with `flags`: the path of the tool it built or found (its last line); throws when it cannot. */
export function llamaCppTool(flags: readonly string[] = []): string {
  const out = execFileSync("bash", [path.join(repoRoot, "scripts/build-llama-server.sh"), ...flags], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "ignore"],
  });
  const last = out.trim().split("\n").at(-1);
  if (!last) throw new Error("build-llama-server.sh printed no path");
  return last;
}

/** The cached llama-server binary, built on first use (about 11 minutes); null when it cannot be built here. */
export function llamaServerBinary(log: (line: string) => void): string | null {
  try {
    log("  llama-server: building or finding the cached build (scripts/build-llama-server.sh)");
    return llamaCppTool();
  } catch (err) {
    log(`  llama-server: cannot be built here (${(err as Error).message.split("\n")[0]})`);
    return null;
  }
}

/** The cached build's path, or null when there is none (never builds: for tests, which skip without it). */
export function cachedLlamaServer(): string | null {
  try {
    return llamaCppTool(["--cached"]);
  } catch {
    return null;
  }
}

/** llama-server on 127.0.0.1 at a free port, ready (its /health answers 200). */
export async function startLlamaServer(binary: string, model: string, c: PeerConfig, extraArgs: readonly string[] = []) {
  const args = ["-m", model, "--host", "127.0.0.1", "--port", "0", "-t", String(c.threads), "-tb", String(c.threads)];
  args.push("-np", String(c.parallel), "-c", String(c.parallel * c.ctxPerSlot), "--no-webui");
  // Embedding inputs are evaluated whole: the physical batch must hold the longest.
  if (c.embeddings) args.push("--embeddings", "--pooling", "mean", "-ub", String(c.ctxPerSlot), "-b", String(c.ctxPerSlot));
  // So is each (query, document) pair of a rerank.
  if (c.reranking) args.push("--reranking", "-ub", String(c.ctxPerSlot), "-b", String(c.ctxPerSlot));
  const child = spawn(binary, [...args, ...extraArgs], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  const stop = async () => {
    if (child.exitCode === null) child.kill("SIGKILL");
    await exited;
  };
  const deadline = Date.now() + 120_000;
  for (;;) {
    const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out);
    if (m) {
      const baseUrl = `http://127.0.0.1:${m[1]}`;
      // Listening comes before the model is ready: wait for /health.
      while ((await fetch(`${baseUrl}/health`).catch(() => undefined))?.status !== 200) await new Promise((r) => setTimeout(r, 50));
      return { baseUrl, stop, log: () => out };
    }
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`llama-server did not start:\n${out.slice(-2000)}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Sends every request, `concurrency` at a time, and times the lot. */
export async function drive(baseUrl: string, requests: readonly PeerRequest[], concurrency: number) {
  let next = 0;
  return timed(
    baseUrl,
    Array.from({ length: concurrency }, () => () => (next < requests.length ? { request: requests[next++] } : undefined)),
  );
}

/**
 * A feed that knows the whole batch ahead, as no feeder reading lines as they come can: the lines in order of their
 * prompt family (first seen first), cut into one run per slot of equal count, each run sent to its own slot one line
 * at a time (`id_slot`, `cache_prompt`). A slot so evaluates only the openings of the families in its run (at most
 * families + slots - 1 in all), and no slot waits at the end while another finishes a longer run.
 */
export function plannedRuns(requests: readonly PeerRequest[], slots: number): PeerRequest[][] {
  const families = new Map<number, PeerRequest[]>();
  for (const r of requests) {
    const key = familyKey(promptOpening(r.body));
    const list = families.get(key) ?? [];
    list.push(r);
    families.set(key, list);
  }
  const ordered = [...families.values()].flat();
  return Array.from({ length: slots }, (_, k) =>
    ordered.slice(Math.floor((k * ordered.length) / slots), Math.floor(((k + 1) * ordered.length) / slots)),
  );
}

/** The planned feed (plannedRuns), timed. */
export async function drivePlanned(baseUrl: string, requests: readonly PeerRequest[], slots: number) {
  const runs = plannedRuns(requests, slots).map((run, slot) => {
    let next = 0;
    return () => (next < run.length ? { request: run[next++], extra: { id_slot: slot, cache_prompt: true } } : undefined);
  });
  return timed(baseUrl, runs);
}

/** A worker's next request, with fields of llama-server's own to add to its body; undefined when it has no more. */
type Next = () => { request: PeerRequest; extra?: object } | undefined;

/** One worker per `next`, each sending what it hands out until it hands out nothing; the whole timed. */
async function timed(baseUrl: string, workers: Next[]) {
  let generated = 0;
  let promptTokens = 0;
  const worker = async (next: Next) => {
    for (let item = next(); item; item = next()) {
      const res = await fetch(`${baseUrl}${item.request.url}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ...item.request.body, ...item.extra }),
      });
      const body = (await res.json()) as { usage?: { completion_tokens?: number; prompt_tokens?: number } };
      if (!res.ok) throw new Error(`llama-server answered ${res.status}: ${JSON.stringify(body).slice(0, 300)}`);
      generated += body.usage?.completion_tokens ?? 0;
      promptTokens += body.usage?.prompt_tokens ?? 0;
    }
  };
  const t0 = performance.now();
  await Promise.all(workers.map(worker));
  return { seconds: (performance.now() - t0) / 1000, generated, promptTokens };
}

/** The prompt tokens a llama-server log says it evaluated; undefined where it timed none. */
export function evaluatedPromptTokens(log: string): number | undefined {
  const timed = [...log.matchAll(/prompt eval time =\s+[\d.]+ ms \/\s+(\d+) tokens/g)];
  return timed.length > 0 ? timed.reduce((n, m) => n + Number(m[1]), 0) : undefined;
}

/**
 * One configuration: start, one warm-up request, the timed run, stop. `feed` is how the lines arrive: the file's
 * order at as many in flight as slots, or the planned feed (drivePlanned).
 */
export async function runPeer(
  binary: string,
  model: string,
  c: PeerConfig,
  requests: readonly PeerRequest[],
  feed: "file" | "planned" = "file",
): Promise<PeerRun> {
  const server = await startLlamaServer(binary, model, c);
  try {
    await drive(server.baseUrl, requests.slice(0, 1), 1);
    const warmed = server.log().length;
    const r =
      feed === "planned" ? await drivePlanned(server.baseUrl, requests, c.parallel) : await drive(server.baseUrl, requests, c.parallel);
    const evaluated = evaluatedPromptTokens(server.log().slice(warmed));
    const cachedTokens = evaluated === undefined ? undefined : r.promptTokens - evaluated;
    return { ...c, ...r, requests: requests.length, cachedTokens };
  } finally {
    await server.stop();
  }
}

/** llama-server's best configuration over `parallel` x `threads`: the shortest time. */
export async function sweepPeer(
  binary: string,
  model: string,
  requests: readonly PeerRequest[],
  grid: { parallel: number[]; threads: number[]; ctxPerSlot: number; embeddings?: boolean; reranking?: boolean },
  log: (line: string) => void,
): Promise<{ runs: PeerRun[]; best: PeerRun }> {
  const runs: PeerRun[] = [];
  for (const threads of grid.threads)
    for (const parallel of grid.parallel) {
      const { ctxPerSlot, embeddings, reranking } = grid;
      const r = await runPeer(binary, model, { parallel, threads, ctxPerSlot, embeddings, reranking }, requests);
      runs.push(r);
      log(`  llama-server -np ${parallel} -t ${threads}: ${r.seconds.toFixed(2)} s (${r.generated} tokens)`);
    }
  const none: PeerRun = { parallel: 0, threads: 0, ctxPerSlot: 0, seconds: Number.NaN, requests: 0, generated: 0, promptTokens: 0 };
  return { runs, best: runs.reduce((a, b) => (b.seconds < a.seconds ? b : a), runs[0] ?? none) };
}
