// Runs `app/main.ts` as a real child process: the compiled build of the run (testkit/entry.ts), as `npm run start:prod` does.
import { type ChildProcess, spawn } from "node:child_process";
import { entryArgs } from "../../testkit/entry.js";
import { repoRoot } from "../../testkit/repo-root.js";

export interface ServerProcess {
  child: ChildProcess;
  baseUrl: string;
  output: () => string;
  exited: Promise<number | null>;
}

export type SpawnedProcess = { child: ChildProcess; output: () => string; exited: Promise<number | null> };

export function spawnMain(env: Record<string, string>, args: string[] = []): SpawnedProcess {
  return spawnServer(process.execPath, [...entryArgs("app/main.ts", ["--expose-gc"]), ...args], env);
}

/** The server started some other way (through npm, or a shell that lowers a limit first), its output kept. */
export function spawnServer(
  command: string,
  args: string[],
  env: Record<string, string>,
  opts: { detached?: boolean } = {},
): SpawnedProcess {
  const child = spawn(command, args, {
    cwd: repoRoot,
    // The drain on SIGTERM has its own test; elsewhere a stop begins at once.
    env: { ...process.env, LOG_LEVEL: "info", SHUTDOWN_DRAIN_SECONDS: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: opts.detached ?? false,
  });
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return { child, output: () => out, exited };
}

/** Starts the server on an ephemeral port and resolves once it logs where it listens. */
export function startMain(env: Record<string, string>, timeoutMs = 30_000): Promise<ServerProcess> {
  return untilListening(spawnMain({ HOST: "127.0.0.1", PORT: "0", ...env }), timeoutMs);
}

/** Resolves once the process logs where it listens (it must have been given HOST=127.0.0.1). */
export async function untilListening(p: SpawnedProcess, timeoutMs = 30_000): Promise<ServerProcess> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = p.output().match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
    if (m) return { ...p, baseUrl: `http://127.0.0.1:${m[1]}` };
    if (p.child.exitCode !== null) throw new Error(`server exited early:\n${p.output()}`);
    if (Date.now() > deadline) {
      p.child.kill("SIGKILL");
      throw new Error(`server did not start:\n${p.output()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}
