// The cluster ports' implementations, each behind one harness, for the contract tests that run against all of
// them: PostgreSQL (a real throwaway database), one process's memory, and that memory kept in a folder.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type pg from "pg";
import pino from "pino";
import { afterAll, beforeAll, beforeEach } from "vitest";
import { MemoryState, memoryPorts, openStateFiles } from "../../embedded/index.js";
import { createPool, migrate } from "../../postgres/db.js";
import { openPgPorts } from "../../postgres/index.js";
import type { ClusterPorts } from "../../state/ports.js";
import { FsBlobStore } from "../../stores/fs-blob-store.js";
import { POSTGRES_BIN, startPostgres, type TestPostgres } from "../../testkit/postgres.js";

const silent = pino({ level: "silent" });
const now = () => Math.floor(Date.now() / 1000);

export interface Harness {
  open(blobs: FsBlobStore): Promise<ClusterPorts>;
  /** Forgets every batch, shard, file and worker. */
  reset(): Promise<void>;
  close(): Promise<void>;
}

function postgresHarness(): Harness {
  let server: TestPostgres | undefined;
  let db: pg.Pool | undefined;
  let ports: ClusterPorts | undefined;
  return {
    async open(blobs) {
      server = await startPostgres();
      db = createPool(server.url, silent);
      await migrate(db, silent);
      ports = await openPgPorts({ url: server.url, blobs, expirySeconds: 3600, now, poolSize: 20, logger: silent });
      return ports;
    },
    async reset() {
      await db?.query(
        "DELETE FROM batches; DELETE FROM files; DELETE FROM workers; DELETE FROM key_shares; DELETE FROM usage_archive; UPDATE share_clock SET v = 0",
      );
    },
    async close() {
      await ports?.close();
      await db?.end();
      server?.destroy();
    },
  };
}

function memoryHarness(): Harness {
  const state = new MemoryState();
  return {
    async open(blobs) {
      return memoryPorts({ state, blobs, expirySeconds: 3600, now });
    },
    async reset() {
      state.batches.clear();
      state.files.clear();
      state.workers.clear();
      state.usageArchive.clear();
      state.shares.vtime.clear();
      state.shares.clock = 0;
    },
    async close() {},
  };
}

/** The memory state kept as documents in a folder. */
function filesHarness(): Harness {
  const dir = mkdtempSync(path.join(os.tmpdir(), "obi-state-"));
  let state: MemoryState;
  return {
    async open(blobs) {
      state = await openStateFiles(dir, silent);
      return memoryPorts({ state, blobs, expirySeconds: 3600, now });
    },
    async reset() {
      await state.flush();
      for (const m of [state.batches, state.files, state.workers, state.usageArchive, state.shares.vtime]) m.clear();
      state.shares.clock = 0;
      rmSync(dir, { recursive: true, force: true });
      mkdirSync(path.join(dir, "files"), { recursive: true });
    },
    async close() {
      await state?.flush();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export const IMPLEMENTATIONS: Array<[string, boolean, () => Harness]> = [
  ["PostgreSQL", !POSTGRES_BIN, postgresHarness],
  ["memory", false, memoryHarness],
  ["memory kept in files", false, filesHarness],
];

/**
 * Opens `h`'s ports once for the enclosing describe block over a blob store in a temp folder (handed to `opened`),
 * empties them before each test and closes them after; nothing happens where `skip`.
 */
export function portsLifecycle(
  h: Harness,
  skip: boolean,
  opened: (ports: ClusterPorts, blobs: FsBlobStore, blobDir: string) => void,
): void {
  let blobDir = "";
  beforeAll(async () => {
    if (skip) return;
    blobDir = mkdtempSync(path.join(os.tmpdir(), "obi-ports-"));
    const blobs = new FsBlobStore(blobDir);
    opened(await h.open(blobs), blobs, blobDir);
  }, 60_000);
  beforeEach(async () => {
    if (!skip) await h.reset();
  });
  afterAll(async () => {
    await h.close();
    if (blobDir) rmSync(blobDir, { recursive: true, force: true });
  });
}
