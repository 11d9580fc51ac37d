// The service as a user runs it: `app/main.ts` in its own process, configured by the environment only.
// Every configuration variable of the parent is dropped, so "default settings" means the defaults.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { repoRoot } from "../testkit/repo-root.js";
import { type MemorySample, readMemory } from "./proc-stats.js";

/** The service's configuration variables (config/config.ts); none may leak in from the bench's own environment. */
const CONFIG_VARS = [
  "PORT",
  "HOST",
  "BATCH_DIR",
  "MODEL_PATH",
  "MODELS_FILE",
  "MODEL_MEMORY_MB",
  "MODEL_IDLE_SECONDS",
  "MODEL_CONFIG",
  "MAX_QUEUE_DEPTH",
  "MAX_FILE_BYTES",
  "MAX_REQUESTS_PER_BATCH",
  "MAX_LINE_BYTES",
  "API_KEYS",
  "FILE_EXPIRY_SECONDS",
  "LOG_LEVEL",
  "GPU",
  "THREADS",
  "SEQUENCES",
  "CONTEXTS",
  "ENGINE_BUILD",
  "KV_UNIFIED",
  "BATCH_ORDER",
  "PREFIX_COPY",
  "CONTEXT_SIZE",
  "EMBEDDING_CONTEXTS",
  "PIPELINE_BATCH_SIZE",
  "PIPELINE_CONCURRENCY",
  "SPOT_CAPACITY",
  "DEDICATED_CAPACITY",
  "SLA_URGENT_SECONDS",
  "DATABASE_URL",
  "ROLE",
  "SHARD_SIZE",
  "CHECKPOINT_SECONDS",
  "LEASE_SECONDS",
  "WORKER_POOL",
  "WORKER_CAPACITY",
  "WORKER_ID",
  "S3_ENDPOINT",
  "S3_BUCKET",
  "S3_REGION",
  "S3_PREFIX",
  "S3_ACCESS_KEY_ID",
  "S3_SECRET_ACCESS_KEY",
  "RESULT_CACHE",
  "RESULT_CACHE_MAX_BYTES",
  "RESULT_CACHE_TTL",
];

export interface BenchServer {
  baseUrl: string;
  pid: number;
  batchDir: string;
  /** Everything the server printed (pino JSON lines). */
  output(): string;
  memory(): MemorySample | undefined;
  stop(): Promise<void>;
  /** kill -9: no drain, no cleanup (a crash). */
  kill9(): Promise<void>;
}

/** Servers still running: a bench that dies (an uncaught error) takes them with it rather than leave them working. */
const running = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of running) child.kill("SIGKILL");
});

/**
 * Starts the server with `MODEL_PATH` and whatever `env` adds, on a free port of 127.0.0.1 with a fresh
 * BATCH_DIR (where results go, not a performance setting), and resolves once it listens. The result cache is off
 * unless `env` turns it on: a bench that runs the same lines twice (best of two, a peer's side and ours) would
 * otherwise time the cache's answers, not the engine's (the cache part measures it on purpose).
 */
export async function startServer(modelPath: string, env: Record<string, string> = {}, timeoutMs = 120_000): Promise<BenchServer> {
  const batchDir = mkdtempSync(path.join(os.tmpdir(), "obi-bench-"));
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !CONFIG_VARS.includes(k)));
  const child: ChildProcess = spawn(
    process.execPath,
    [
      ...(process.env.BENCH_NODE_FLAGS?.split(" ").filter(Boolean) ?? []),
      "--expose-gc",
      "--import",
      "tsx",
      path.join(repoRoot, "app/main.ts"),
    ],
    {
      cwd: repoRoot,
      env: {
        ...base,
        MODEL_PATH: modelPath,
        HOST: "127.0.0.1",
        PORT: "0",
        SHUTDOWN_DRAIN_SECONDS: "0",
        BATCH_DIR: batchDir,
        RESULT_CACHE: "off",
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  running.add(child);
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  void exited.then(() => running.delete(child));
  const stop = async () => {
    if (child.exitCode === null) child.kill("SIGTERM");
    await exited;
    rmSync(batchDir, { recursive: true, force: true });
  };

  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out);
    if (m) {
      return {
        baseUrl: `http://127.0.0.1:${m[1]}`,
        pid: child.pid!,
        batchDir,
        output: () => out,
        memory: () => readMemory(child.pid!),
        stop,
        kill9: async () => {
          child.kill("SIGKILL");
          await exited;
        },
      };
    }
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`the server did not start:\n${out.slice(-4000)}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The engine build the server runs ("patched" or "prebuilt", its /ready), or undefined where its backend is not local. */
export async function engineBuild(baseUrl: string): Promise<string | undefined> {
  const ready = (await (await fetch(`${baseUrl}/ready`)).json()) as { backend?: { settings?: { engineBuild?: unknown } } };
  const build = ready.backend?.settings?.engineBuild;
  return typeof build === "string" ? build : undefined;
}

/** Samples a process's resident memory every `everyMs` until stopped; keeps the largest value seen. */
export function sampleMemory(read: () => MemorySample | undefined, everyMs = 50) {
  let max = 0;
  const take = () => {
    const m = read();
    if (m && m.rss > max) max = m.rss;
  };
  take();
  const timer = setInterval(take, everyMs);
  return {
    stop(): number {
      clearInterval(timer);
      take();
      return max;
    },
  };
}
