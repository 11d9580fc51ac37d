// A server's dataset reads, each in a process of its own, killed past its memory (DATASET_READ_MEMORY_MB) or past
// its step time (DATASET_STEP_SECONDS) while the service and its other work go on. Why a process: what a single
// DuckDB call builds lies outside DuckDB's memory limit, and DuckDB stops a query only between chunks of rows. The
// memory is capped by the kernel (RLIMIT_DATA, which the shell that starts the process lowers) and watched from here
// (its resident size every 50 ms), and each step is timed from here. One process is started ahead so that a read
// starts warm; none is ever given a second read.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type pino from "pino";
import type { ChildMessage, ParentMessage, ReadTask, Rendered } from "./read-tasks.js";
import { received } from "./read-tasks.js";

/** How often a read's resident memory is looked at. */
const POLL_MS = 50;
/** How long past its step limit a step may run before its process is killed (DuckDB's own interrupt comes first). */
const KILL_GRACE_MS = 2_000;
/** A process started ahead and not taken within this is ended: a server that reads no dataset keeps none. */
const SPARE_IDLE_MS = 5 * 60_000;
/** The part of its stderr a failed read's process leaves for the log. */
const STDERR_TAIL = 4_096;
/** The environment a read's process gets: no secret of the service's (keys, database, S3) is in it. */
const CHILD_ENV = ["PATH", "HOME", "TMPDIR", "TZ", "LANG", "LC_ALL", "NODE_ENV"];

/**
 * DATASET_READ_MEMORY_MB, with 0 as the default share: the `reads` that run at once (DATASET_READS) take at most half
 * the memory the service may use between them, each 256 MB to 4 GB.
 */
export function readMemoryMb(
  setting: number,
  reads: number,
  memory: { total: number; constrained?: number } = { total: os.totalmem(), constrained: process.constrainedMemory?.() },
): number {
  if (setting > 0) return setting;
  const { total, constrained } = memory;
  // In a container, the cgroup's limit is the memory the service may use, not the machine's.
  const usable = constrained && constrained > 0 && constrained < total ? constrained : total;
  return Math.min(4096, Math.max(256, Math.floor(usable / 2 / reads / 2 ** 20)));
}

/** A read was stopped from outside, at its memory or its time. */
export class ReadStopped extends Error {
  constructor(readonly bound: "memory" | "time") {
    super(`a dataset read was stopped at its ${bound}`);
  }
}

export interface ReadProcessOptions {
  /** The most memory a read's process may take (DATASET_READ_MEMORY_MB, resolved). */
  memoryMb: number;
  /** DATASET_STEP_SECONDS, in ms. */
  stepMs: number;
  logger: pino.Logger;
}

/** The child's entry beside this file: TypeScript under tsx (npm start, tests), JavaScript in the compiled build. */
export function childEntry(): { entry: string; nodeArgs: string[] } {
  const here = fileURLToPath(import.meta.url);
  const ext = path.extname(here);
  const entry = path.join(path.dirname(here), `read-child${ext}`);
  if (ext !== ".ts") return { entry, nodeArgs: [] };
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
  return { entry, nodeArgs: ["--import", tsx] };
}

function start(memoryMb: number): ChildProcess {
  const { entry, nodeArgs } = childEntry();
  const env = Object.fromEntries(CHILD_ENV.filter((k) => process.env[k] !== undefined).map((k) => [k, process.env[k]]));
  const node = [process.execPath, ...nodeArgs, entry];
  // The shell lowers the data limit (heap and anonymous maps, where DuckDB's values live) and becomes node: an
  // allocation past it fails inside DuckDB as its Out of Memory Error, where a resident-size watch alone would see
  // the growth only after it happened. Node has no setrlimit of its own.
  const limited = process.platform === "linux" && existsSync("/bin/sh");
  const [command, args] = limited
    ? ["/bin/sh", ["-c", 'ulimit -d "$1" 2>/dev/null; shift; exec "$@"', "dataset-read", String(memoryMb * 1024), ...node]]
    : [node[0], node.slice(1)];
  return spawn(command, args as string[], { stdio: ["ignore", "ignore", "pipe", "ipc"], env });
}

/** VmRSS and VmData of `pid`, in KiB; undefined where /proc has none. */
async function memoryKb(pid: number): Promise<{ rss: number; data: number } | undefined> {
  const status = await readFile(`/proc/${pid}/status`, "utf8").catch(() => undefined);
  if (!status) return undefined;
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+)`, "m").exec(status)?.[1] ?? 0);
  return { rss: kb("VmRSS"), data: kb("VmData") };
}

/** `child` killed, once it has exited. */
function ended(child: ChildProcess): Promise<void> {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  const exit = new Promise<void>((resolve) => {
    child.once("exit", () => resolve());
    child.once("error", () => resolve());
  });
  child.kill("SIGKILL");
  return exit;
}

export class DatasetReadProcesses {
  private spare: ChildProcess | undefined;
  private spareTimer: NodeJS.Timeout | undefined;
  private readonly live = new Set<ChildProcess>();
  private closed = false;

  constructor(private readonly opts: ReadProcessOptions) {}

  /**
   * Runs `task` in a process of its own; a ReadStopped where it was killed at its memory or its time, and `gone`'s
   * reason where it was killed because its client went away.
   */
  async run(task: ReadTask, gone?: AbortSignal): Promise<Rendered | null> {
    if (this.closed) throw new Error("dataset reads are closed");
    gone?.throwIfAborted();
    const child = this.take();
    this.live.add(child);
    const end = () => child.kill("SIGKILL");
    gone?.addEventListener("abort", end, { once: true });
    try {
      return await this.watch(child, task, gone);
    } finally {
      gone?.removeEventListener("abort", end);
      this.live.delete(child);
      // Its answer may come before its end: the read is over once its memory is given back, so the reads that may
      // run at once (DATASET_READS) never hold more than their share between them.
      await ended(child);
      // Started once the read is over: starting node takes a core for half a second, which the read would share.
      this.startSpare();
    }
  }

  /** Ends the processes started ahead or still reading. */
  close(): void {
    this.closed = true;
    this.dropSpare();
    for (const child of this.live) child.kill("SIGKILL");
  }

  /** The process started ahead, if it is still up, else a new one: never one that read before. */
  private take(): ChildProcess {
    const spare = this.spare;
    this.spare = undefined;
    clearTimeout(this.spareTimer);
    const up = spare && spare.exitCode === null && spare.signalCode === null;
    if (!up) spare?.kill("SIGKILL");
    const child = up ? spare : start(this.opts.memoryMb);
    child.ref();
    (child as unknown as { channel?: { ref(): void } }).channel?.ref();
    return child;
  }

  private startSpare(): void {
    if (this.closed || this.spare) return;
    const spare = start(this.opts.memoryMb);
    spare.on("error", () => undefined);
    spare.stderr?.resume();
    // A process started ahead does not keep the service's process alive.
    spare.unref();
    (spare as unknown as { channel?: { unref(): void } }).channel?.unref();
    this.spare = spare;
    this.spareTimer = setTimeout(() => this.dropSpare(), SPARE_IDLE_MS).unref();
  }

  private dropSpare(): void {
    clearTimeout(this.spareTimer);
    this.spare?.kill("SIGKILL");
    this.spare = undefined;
  }

  private watch(child: ChildProcess, task: ReadTask, gone?: AbortSignal): Promise<Rendered | null> {
    const capKb = this.opts.memoryMb * 1024;
    return new Promise((resolve, reject) => {
      let stopped: ReadStopped | undefined;
      let settled = false;
      let stepTimer: NodeJS.Timeout | undefined;
      const peakKb = { rss: 0, data: 0 };
      let stderr = "";
      let polling = false;
      const kill = (bound: "memory" | "time") => {
        stopped ??= new ReadStopped(bound);
        child.kill("SIGKILL");
      };
      const poll = setInterval(async () => {
        if (polling || child.pid === undefined) return;
        polling = true;
        const kb = await memoryKb(child.pid);
        polling = false;
        if (!kb) return;
        peakKb.rss = Math.max(peakKb.rss, kb.rss);
        peakKb.data = Math.max(peakKb.data, kb.data);
        if (kb.rss > capKb) kill("memory");
      }, POLL_MS);
      const settle = (fn: () => void) => {
        if (settled) return;
        settled = true;
        clearInterval(poll);
        clearTimeout(stepTimer);
        fn();
      };
      child.stderr?.on("data", (d: Buffer) => {
        stderr = (stderr + d.toString("utf8")).slice(-STDERR_TAIL);
      });
      child.on("message", (m: ChildMessage) => {
        if (m.type === "step") {
          clearTimeout(stepTimer);
          stepTimer = m.running ? setTimeout(() => kill("time"), this.opts.stepMs + KILL_GRACE_MS) : undefined;
        } else if (m.type === "done") settle(() => resolve(m.value));
        else if (m.type === "failed") settle(() => reject(received(m.error)));
      });
      child.on("error", (err) => settle(() => reject(err)));
      // Not "exit": "close" comes once the channel is drained too, so an answer sent just before the end is read.
      child.on("close", (code, signal) =>
        settle(() => {
          if (gone?.aborted) return reject(gone.reason);
          // Past the data limit, node itself may be what fails to allocate and aborts: that is the memory too.
          const memory =
            Math.max(peakKb.rss, peakKb.data) > capKb * 0.8 || /out of memory|bad_alloc|allocation fail|heap limit/i.test(stderr);
          if (stopped || memory) {
            const bound = stopped?.bound ?? "memory";
            this.opts.logger.warn(
              { where: task.job.where, bound, residentMb: Math.round(peakKb.rss / 1024), dataMb: Math.round(peakKb.data / 1024) },
              "a dataset read was stopped at a limit",
            );
            return reject(stopped ?? new ReadStopped("memory"));
          }
          this.opts.logger.error({ code, signal, stderr }, "a dataset read's process ended without an answer");
          reject(new Error(`a dataset read's process ended without an answer (${signal ?? `exit code ${code}`})`));
        }),
      );
      child.send({ type: "task", task } satisfies ParentMessage);
    });
  }
}
