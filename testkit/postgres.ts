// A throwaway PostgreSQL cluster for the distributed tests and the bench: initdb in a temp folder, pg_ctl on a loopback port,
// removed after. Debian's postgresql package provides the binaries (`.ci/run` installs it); where they are absent
// the tests that need them skip with a note.
import { execFileSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";

function findBin(): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(":"))
    if (existsSync(path.join(dir, "initdb")) && existsSync(path.join(dir, "pg_ctl"))) return dir;
  const base = "/usr/lib/postgresql";
  if (!existsSync(base)) return undefined;
  const versions = readdirSync(base).sort((a, b) => Number(b) - Number(a));
  for (const v of versions) if (existsSync(path.join(base, v, "bin", "initdb"))) return path.join(base, v, "bin");
  return undefined;
}

export const POSTGRES_BIN = findBin();
export const SKIP_POSTGRES_NOTE = "PostgreSQL is not installed (apt-get install -y postgresql): the distributed-mode tests are skipped";

export interface TestPostgres {
  url: string;
  port: number;
  stop(): void;
  start(): void;
  /** Stops the server for good and removes its folder. */
  destroy(): void;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
    srv.on("error", reject);
  });
}

/** initdb refuses to run as root: there the server runs as the `postgres` user the package creates. */
function asServerUser(bin: string, args: string[]): void {
  const root = process.getuid?.() === 0;
  if (root) execFileSync("runuser", ["-u", "postgres", "--", bin, ...args], { stdio: "pipe" });
  else execFileSync(bin, args, { stdio: "pipe" });
}

export async function startPostgres(): Promise<TestPostgres> {
  if (!POSTGRES_BIN) throw new Error(SKIP_POSTGRES_NOTE);
  const bin = POSTGRES_BIN;
  const dir = mkdtempSync(path.join(os.tmpdir(), "obi-pg-"));
  chmodSync(dir, 0o700);
  if (process.getuid?.() === 0) {
    const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
    chownSync(dir, uid, gid);
  }
  const data = path.join(dir, "data");
  asServerUser(path.join(bin, "initdb"), ["-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"]);
  const port = await freePort();
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`;
  const start = () => asServerUser(path.join(bin, "pg_ctl"), ["-D", data, "-o", opts, "-l", path.join(dir, "log"), "-w", "start"]);
  const stop = () => asServerUser(path.join(bin, "pg_ctl"), ["-D", data, "-m", "fast", "-w", "stop"]);
  start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    start,
    stop,
    destroy() {
      try {
        stop();
      } catch {
        // already stopped
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
