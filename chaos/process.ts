// The service as the nemesis sees it: a real process (app/main.ts, started as testkit/entry.ts says) that can be killed,
// frozen and started again, whose /metrics are read while it lives.
import { type ChildProcess, spawn } from "node:child_process";
import { entryArgs } from "../testkit/entry.js";
import { repoRoot } from "../testkit/repo-root.js";

export interface ServiceProcess {
  child: ChildProcess;
  baseUrl: string;
  output(): string;
  exited: Promise<number | null>;
}

/** Starts `command args` (by default the service itself) and resolves once it logs where it listens. */
export async function startService(
  env: Record<string, string>,
  opts: { command?: string; args?: string[]; timeoutMs?: number } = {},
): Promise<ServiceProcess> {
  const child = spawn(opts.command ?? process.execPath, opts.args ?? entryArgs("app/main.ts", ["--expose-gc"]), {
    cwd: repoRoot,
    env: { ...process.env, HOST: "127.0.0.1", PORT: "0", LOG_LEVEL: "info", SHUTDOWN_DRAIN_SECONDS: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  // Only the tail is kept: a long campaign's logs would otherwise fill memory.
  const keep = (d: Buffer) => {
    out += d;
    if (out.length > 200_000) out = out.slice(-100_000);
  };
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  for (;;) {
    const m = out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
    if (m) return { child, baseUrl: `http://127.0.0.1:${m[1]}`, output: () => out, exited };
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`the service did not start:\n${out.slice(-3000)}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * As a supervisor (systemd, Kubernetes) restarts a service that exits at start, say because its database is down
 * that moment: tried again every second for up to `withinMs`.
 */
export async function startSupervised(
  env: Record<string, string>,
  opts: Parameters<typeof startService>[1] & { withinMs?: number } = {},
): Promise<ServiceProcess> {
  const until = Date.now() + (opts.withinMs ?? 90_000);
  for (;;) {
    try {
      return await startService(env, opts);
    } catch (err) {
      if (Date.now() > until) throw err;
      await new Promise((r) => setTimeout(r, 1_000));
    }
  }
}

/**
 * Whether the process still runs. A process killed by a signal has no exit code (only a signal code), and its port
 * may already serve another process: asking its address then reads someone else's figures.
 */
export const alive = (p: ServiceProcess | undefined): p is ServiceProcess =>
  p !== undefined && p.child.exitCode === null && p.child.signalCode === null;

/** Requests this process ran to a result (obi_batch_requests_total), or undefined when it does not answer. */
export async function requestsRun(baseUrl: string): Promise<number | undefined> {
  try {
    const text = await (await fetch(`${baseUrl}/metrics`, { signal: AbortSignal.timeout(1_000) })).text();
    let n = 0;
    for (const m of text.matchAll(/^obi_batch_requests_total\{[^}]*\} (\d+)/gm)) n += Number(m[1]);
    return n;
  } catch {
    return undefined;
  }
}
