// A throwaway PostgreSQL cluster for the distributed tests and the bench: a copy of one initdb'd cluster in a temp
// folder, pg_ctl on a loopback port, removed after. Debian's postgresql package provides the binaries (`.ci/run` installs it); where they are absent
// the tests that need them skip with a note.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, renameSync, rmSync } from "node:fs";
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

/** A folder of the server's own, as initdb and the server need it: 0700, the `postgres` user's where we are root. */
function serverFolder(prefix: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  chmodSync(dir, 0o700);
  if (process.getuid?.() === 0) {
    const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
    chownSync(dir, uid, gid);
  }
  return dir;
}

const INITDB_ARGS = ["-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"];

/**
 * initdb's fresh cluster, made once per machine and PostgreSQL build and copied for each server: initdb was most of
 * a start, and a suite starts a few dozen. It appears only by the rename of a complete one, so workers racing to
 * make it each get a whole one.
 */
function initdbTemplate(bin: string): string {
  const key = createHash("sha256")
    .update(`${bin} ${INITDB_ARGS.join(" ")}`)
    .digest("hex")
    .slice(0, 12);
  const template = path.join(os.tmpdir(), `obi-pg-template-${key}`);
  if (existsSync(path.join(template, "PG_VERSION"))) return template;
  const scratch = serverFolder("obi-pg-init-");
  try {
    asServerUser(path.join(bin, "initdb"), ["-D", path.join(scratch, "data"), ...INITDB_ARGS]);
    renameSync(path.join(scratch, "data"), template);
  } catch (err) {
    // Another worker's rename came first: its template is as good.
    if (!existsSync(path.join(template, "PG_VERSION"))) throw err;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  return template;
}

export async function startPostgres(): Promise<TestPostgres> {
  if (!POSTGRES_BIN) throw new Error(SKIP_POSTGRES_NOTE);
  const bin = POSTGRES_BIN;
  const dir = serverFolder("obi-pg-");
  const data = path.join(dir, "data");
  // cp -a keeps the owner and the 0700 mode the server insists on.
  execFileSync("cp", ["-a", initdbTemplate(bin), data]);
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
