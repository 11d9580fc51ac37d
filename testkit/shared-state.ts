// The distributed mode's shared state, for tests and the bench: a throwaway PostgreSQL cluster and an S3 protocol
// server (s3rver, a dev dependency) on loopback, and the settings that point the service at them.
import { mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import S3rver from "s3rver";
import { startPostgres, type TestPostgres } from "./postgres.js";

export interface SharedState {
  pg: TestPostgres;
  /** DATABASE_URL and the S3 settings every node gets. */
  env: Record<string, string>;
  /** Stops the S3 server (storage unreachable) and starts it again on the same port. */
  stopS3(): Promise<void>;
  startS3(): Promise<void>;
  close(): Promise<void>;
}

export async function startSharedState(): Promise<SharedState> {
  const pg = await startPostgres();
  const dir = mkdtempSync(path.join(os.tmpdir(), "obi-s3-"));
  let port = 0;
  let s3: S3rver | undefined;
  const startS3 = async () => {
    // No bucket: the service creates it at start (several nodes starting at once race to).
    s3 = new S3rver({ address: "127.0.0.1", port, silent: true, directory: dir });
    port = ((await s3.run()) as AddressInfo).port;
  };
  await startS3();
  return {
    pg,
    env: {
      DATABASE_URL: pg.url,
      S3_ENDPOINT: `http://127.0.0.1:${port}`,
      S3_BUCKET: "obi",
      S3_ACCESS_KEY_ID: "S3RVER",
      S3_SECRET_ACCESS_KEY: "S3RVER",
    },
    async stopS3() {
      await s3?.close();
      s3 = undefined;
    },
    startS3,
    async close() {
      await s3?.close();
      pg.destroy();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
