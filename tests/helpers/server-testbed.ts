// The setup shared by tests that run the real server process, stop it and start it again on the same
// BATCH_DIR: one temp BATCH_DIR per file, the small test model on the CPU, cleanup of whatever is left.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll } from "vitest";
import { testModelPath } from "../../testkit/model.js";
import { type ServerProcess, startMain } from "./process.js";

export interface ServerTestbed {
  dir: string;
  /** Starts `app/main.ts` on the testbed's BATCH_DIR; `env` adds to or overrides the defaults. */
  start(env?: Record<string, string>): Promise<ServerProcess>;
}

/** The environment a test server runs with: the small test model on the CPU, on loopback, `dir` as BATCH_DIR. */
export async function serverEnv(dir: string): Promise<Record<string, string>> {
  return {
    HOST: "127.0.0.1",
    PORT: "0",
    BATCH_DIR: dir,
    MODEL_PATH: await testModelPath(),
    GPU: "false",
    THREADS: "1",
    SEQUENCES: "4",
    CONTEXT_SIZE: "512",
  };
}

/** Registers an afterAll that kills any server still running and removes the BATCH_DIR. */
export function serverTestbed(name: string, baseEnv: Record<string, string> = {}): ServerTestbed {
  const dir = mkdtempSync(path.join(os.tmpdir(), `obi-${name}-`));
  const servers: ServerProcess[] = [];
  afterAll(async () => {
    for (const s of servers) {
      if (s.child.exitCode !== null || s.child.signalCode !== null) continue;
      s.child.kill("SIGKILL");
      await s.exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });
  return {
    dir,
    async start(env = {}) {
      const s = await startMain({ ...(await serverEnv(dir)), ...baseEnv, ...env });
      servers.push(s);
      return s;
    },
  };
}
