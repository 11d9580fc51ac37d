// The schema owned by a migration job: `main --migrate` (the Kubernetes Job, compose's `migrate` service)
// applies every migration once and exits; processes with MIGRATE=false refuse a schema that lacks one they ship,
// naming it, and start on a current one without migrating. On a real PostgreSQL, the entry point as a process.
import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../app/logger.js";
import { buildService } from "../../app/service.js";
import { loadConfig } from "../../config/config.js";
import { entryArgs } from "../../testkit/entry.js";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE, startPostgres, type TestPostgres } from "../../testkit/postgres.js";
import { repoRoot } from "../../testkit/repo-root.js";
import { testServiceEnv } from "../helpers/service.js";

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

const shipped = readdirSync(path.join(repoRoot, "postgres/migrations"))
  .filter((f) => f.endsWith(".sql"))
  .map((f) => f.replace(/\.sql$/, ""))
  .sort();

describe.skipIf(!POSTGRES_BIN)("the migration job", () => {
  let server: TestPostgres;
  let dir: string;
  beforeAll(async () => {
    server = await startPostgres();
    dir = mkdtempSync(path.join(os.tmpdir(), "obi-migrate-"));
  }, 60_000);
  afterAll(() => {
    server?.destroy();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const env = async (more: Record<string, string>) => ({
    ...(await testServiceEnv(dir)),
    DATABASE_URL: server.url,
    ROLE: "api",
    LOG_FORMAT: "json",
    LOG_LEVEL: "info",
    ...more,
  });
  const versions = async () => {
    const c = new pg.Client(server.url);
    await c.connect();
    try {
      return (await c.query("SELECT version FROM schema_migrations ORDER BY version")).rows.map((r) => r.version);
    } catch {
      return [];
    } finally {
      await c.end();
    }
  };
  const migrateJob = async () =>
    promisify(execFile)(process.execPath, [...entryArgs("app/main.ts"), "--migrate"], {
      cwd: repoRoot,
      env: { ...process.env, ...(await env({})) },
    });

  it("refuses MIGRATE=false on a schema that lacks migrations; the job applies them once; then the processes start", async () => {
    const config = loadConfig(await env({ MIGRATE: "false" }));
    await expect(buildService(config, createLogger("silent"))).rejects.toThrow(/lacks migrations 001_initial.*MIGRATE=false.*--migrate/);
    expect(await versions()).toEqual([]);

    const first = await migrateJob();
    expect(first.stdout).toMatch(/"msg":"migrations applied"/);
    expect(await versions()).toEqual(shipped);
    const again = await migrateJob();
    expect(again.stdout).toMatch(/"msg":"the schema is current"/);

    const service = await buildService(config, createLogger("silent"));
    await service.close({ graceMs: 0 });
    expect(await versions()).toEqual(shipped);
  }, 120_000);

  it("runs at every rollout: the init containers of several new pods migrating at once each succeed, and apply each migration once", async () => {
    await promisify(execFile)(process.execPath, [...entryArgs("app/main.ts"), "--migrate-down", "none"], {
      cwd: repoRoot,
      env: { ...process.env, ...(await env({})) },
    });
    expect(await versions()).toEqual([]);
    const pods = await Promise.all([migrateJob(), migrateJob(), migrateJob()]);
    const said = pods.map((p) =>
      /"msg":"migrations applied"/.test(p.stdout) ? "applied" : /"msg":"the schema is current"/.test(p.stdout) ? "current" : p.stdout,
    );
    expect(said.sort()).toEqual(["applied", "current", "current"]);
    expect(await versions()).toEqual(shipped);
  }, 120_000);

  it("reverts to an older release's schema with --migrate-down, and migrates up again; every migration has its down", async () => {
    const down = readdirSync(path.join(repoRoot, "postgres/migrations/down"))
      .map((f) => f.replace(/\.sql$/, ""))
      .sort();
    expect(down).toEqual(shipped);
    const job = async (args: string[]) =>
      promisify(execFile)(process.execPath, [...entryArgs("app/main.ts"), ...args], {
        cwd: repoRoot,
        env: { ...process.env, ...(await env({})) },
      });
    await job(["--migrate"]);
    const c = new pg.Client(server.url);
    await c.connect();
    try {
      const reverted = await job(["--migrate-down", "004_webhooks"]);
      expect(reverted.stdout).toMatch(/"msg":"migrations reverted"/);
      expect(await versions()).toEqual(shipped.filter((v) => v <= "004_webhooks"));
      expect((await c.query("SELECT to_regclass('totals') AS t")).rows[0].t).toBeNull();
      const cols = (await c.query("SELECT column_name FROM information_schema.columns WHERE table_name = 'batches'")).rows.map(
        (r) => r.column_name,
      );
      expect(cols).toContain("webhook");
      expect(cols).not.toContain("spot_seconds");
      const bad = await job(["--migrate-down", "999_nothing"]).catch((e) => e);
      expect(bad.code).toBe(1);
      expect(bad.stderr).toMatch(/no migration '999_nothing'/);
      await job(["--migrate-down", "none"]);
      expect(await versions()).toEqual([]);
      expect((await c.query("SELECT to_regclass('batches') AS t")).rows[0].t).toBeNull();
      await job(["--migrate"]);
      expect(await versions()).toEqual(shipped);
    } finally {
      await c.end();
    }
  }, 120_000);

  it("says what --migrate needs without a database", async () => {
    const res = await promisify(execFile)(process.execPath, [...entryArgs("app/main.ts"), "--migrate"], {
      cwd: repoRoot,
      env: { ...process.env, ...(await env({ DATABASE_URL: "" })), ROLE: "all" },
    }).catch((e) => e);
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/--migrate needs DATABASE_URL/);
  }, 60_000);
});
