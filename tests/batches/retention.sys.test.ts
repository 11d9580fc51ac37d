// Retention in the distributed mode: expired files go with their contents, and a batch goes FILE_EXPIRY_SECONDS
// after it ended with every object of its left in S3, as batch folders go in the embedded mode.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { S3BlobStore } from "../../stores/s3-blob-store.js";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../testkit/postgres.js";
import { completionJsonl } from "../../testkit/workload.js";
import { type SharedState, startNode, startSharedState, type TestNode } from "../helpers/cluster.js";
import { uploadJsonl } from "../helpers/http-batches.js";
import { openaiClient, waitForBatch } from "../helpers/service.js";

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

describe.skipIf(!POSTGRES_BIN)("distributed retention", () => {
  let shared: SharedState;
  let node: TestNode;
  beforeAll(async () => {
    shared = await startSharedState();
    node = await startNode(shared, { ROLE: "all", SHARD_SIZE: "5", FILE_EXPIRY_SECONDS: "3", COLLECT_INTERVAL_SECONDS: "1" });
  }, 60_000);
  afterAll(async () => {
    await node?.close();
    await shared?.close();
  }, 60_000);

  it("removes an ended batch, its files and their objects once they expire (an input deleted mid-run included)", async () => {
    const s3 = new S3BlobStore({
      bucket: shared.env.S3_BUCKET,
      client: {
        endpoint: shared.env.S3_ENDPOINT,
        region: "us-east-1",
        forcePathStyle: true,
        credentials: { accessKeyId: shared.env.S3_ACCESS_KEY_ID, secretAccessKey: shared.env.S3_SECRET_ACCESS_KEY },
      },
    });
    try {
      const file = await uploadJsonl(node.baseUrl, completionJsonl(200, { prefix: "ret", maxTokens: 32 }));
      const b = await openaiClient(node).batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" });
      // The input file is deleted while its batch runs: its content stays until the batch no longer needs it.
      expect((await fetch(`${node.baseUrl}/v1/files/${file.id}`, { method: "DELETE" })).status).toBe(200);
      expect(await s3.size(`files/${file.id}.jsonl`)).toBeGreaterThan(0);
      const done = await waitForBatch(node.baseUrl, b.id, 60_000);
      expect(done.status).toBe("completed");
      expect(done.request_counts).toEqual({ completed: 200, failed: 0, total: 200 });
      expect(await s3.size(`${b.id}/output.jsonl`)).toBeGreaterThan(0);
      await expect
        .poll(async () => (await fetch(`${node.baseUrl}/v1/batches/${b.id}`)).status, { timeout: 15_000, interval: 500 })
        .toBe(404);
      expect((await fetch(`${node.baseUrl}/v1/files/${file.id}`)).status).toBe(404);
      expect((await fetch(`${node.baseUrl}/v1/files/${done.output_file_id}`)).status).toBe(404);
      expect(await s3.size(`${b.id}/output.jsonl`)).toBeUndefined();
      expect(await s3.size(`files/${file.id}.jsonl`)).toBeUndefined();
      // Nothing of the batch is left (its shard parts went when it was finalized; this finds none to delete).
      expect(await s3.deletePrefix(`${b.id}/`)).toBe(0);
    } finally {
      s3.close();
    }
  }, 60_000);
});
