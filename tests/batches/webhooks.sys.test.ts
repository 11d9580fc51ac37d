// Webhooks and uploads in the distributed mode, on real PostgreSQL and S3: the event is written with the batch's final status in
// its row and delivered by whichever process holds the maintenance's lease, signed as the official client verifies.
import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import OpenAI, { toFile } from "openai";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../../testkit/batch-client.js";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../testkit/postgres.js";
import { completionJsonl } from "../../testkit/workload.js";
import { closeCluster, type SharedState, startNode, startSharedState, type TestNode } from "../helpers/cluster.js";
import { uploadJsonl } from "../helpers/http-batches.js";
import { waitForBatch } from "../helpers/service.js";

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

describe.skipIf(!POSTGRES_BIN)("webhooks (distributed mode)", () => {
  const secret = `whsec_${randomBytes(32).toString("base64")}`;
  const keyed = `whsec_${randomBytes(32).toString("base64")}`;
  const deliveries: Array<{ path: string; body: string; headers: Record<string, string> }> = [];
  let receiver: http.Server;
  let url = "";
  let shared: SharedState;
  const nodes: TestNode[] = [];

  beforeAll(async () => {
    receiver = http.createServer((req, res) => {
      let body = "";
      req.on("data", (c) => {
        body += c;
      });
      req.on("end", () => {
        deliveries.push({ path: req.url ?? "", body, headers: req.headers as Record<string, string> });
        res.end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
    url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    shared = await startSharedState();
    const env = {
      SHARD_SIZE: "2",
      API_KEYS: "team-a,team-b",
      WEBHOOK_URL: `${url}/all`,
      WEBHOOK_SECRET: secret,
      WEBHOOKS_BY_KEY: JSON.stringify({ "team-b": { url: `${url}/team-b`, secret: keyed } }),
    };
    nodes.push(await startNode(shared, { ...env, ROLE: "api" }));
    nodes.push(await startNode(shared, { ...env, ROLE: "worker", WORKER_ID: "w1" }));
  }, 120_000);
  afterAll(async () => {
    await closeCluster(nodes, shared);
    await new Promise((r) => receiver?.close(r));
  }, 60_000);

  it("delivers each key's events to its endpoint (the deployment's by default), recorded in the batch's row", async () => {
    const [api] = nodes;
    const submit = async (key: string, prefix: string) => {
      const headers = { authorization: `Bearer ${key}` };
      const file = await uploadJsonl(api.baseUrl, completionJsonl(5, { prefix, maxTokens: 2 }), headers);
      const client = new OpenAI({ baseURL: `${api.baseUrl}/v1`, apiKey: key, maxRetries: 0 });
      const b = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" });
      await waitForBatch(api.baseUrl, b.id, 60_000, headers);
      return b.id;
    };
    const [a, b] = [await submit("team-a", "wa"), await submit("team-b", "wb")];
    const deadline = Date.now() + 30_000;
    while (deliveries.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const of = (id: string) => deliveries.filter((d) => d.body.includes(id));
    expect(of(a).map((d) => d.path)).toEqual(["/all"]);
    expect(of(b).map((d) => d.path)).toEqual(["/team-b"]);
    const verify = new OpenAI({ apiKey: "unused" }).webhooks;
    expect(await verify.unwrap(of(a)[0].body, of(a)[0].headers, secret)).toMatchObject({ type: "batch.completed", data: { id: a } });
    expect(await verify.unwrap(of(b)[0].body, of(b)[0].headers, keyed)).toMatchObject({ type: "batch.completed", data: { id: b } });
    await expect(verify.unwrap(of(b)[0].body, of(b)[0].headers, secret)).rejects.toThrow();

    const db = new pg.Client({ connectionString: shared.env.DATABASE_URL });
    await db.connect();
    try {
      // The row records a delivery once the receiver has answered it, so a moment after the receiver saw it.
      const rows = await until("both deliveries recorded", async () => {
        const found = (await db.query("SELECT id, webhook FROM batches WHERE id = ANY($1)", [[a, b]])).rows;
        return found.length === 2 && found.every((r) => r.webhook?.attempts > 0) ? found : undefined;
      });
      for (const r of rows) expect(r.webhook).toMatchObject({ attempts: 1, last_status: 200, gave_up: false });
      for (const r of rows) expect(r.webhook.delivered_at).toBeGreaterThan(0);
    } finally {
      await db.end();
    }
  });
});

describe.skipIf(!POSTGRES_BIN)("uploads (distributed mode, S3)", () => {
  let shared: SharedState;
  const nodes: TestNode[] = [];
  beforeAll(async () => {
    shared = await startSharedState();
    nodes.push(await startNode(shared, { ROLE: "api" }));
    nodes.push(await startNode(shared, { ROLE: "api" }));
  }, 120_000);
  afterAll(() => closeCluster(nodes, shared), 60_000);

  it("takes the parts of one upload on two API servers and completes it on either, the file in S3", async () => {
    const [a, b] = nodes.map((n) => new OpenAI({ baseURL: `${n.baseUrl}/v1`, apiKey: "unused", maxRetries: 0 }));
    const content = completionJsonl(20, { prefix: "s3up", maxTokens: 1 });
    const bytes = Buffer.from(content);
    const half = Math.floor(bytes.length / 2);
    const upload = await a.uploads.create({ bytes: bytes.length, filename: "s3.jsonl", mime_type: "application/jsonl", purpose: "batch" });
    const p1 = await a.uploads.parts.create(upload.id, { data: await toFile(bytes.subarray(0, half), "p1") });
    const p2 = await b.uploads.parts.create(upload.id, { data: await toFile(bytes.subarray(half), "p2") });
    const done = await b.uploads.complete(upload.id, { part_ids: [p1.id, p2.id] });
    expect(done.status).toBe("completed");
    expect(await (await a.files.content(done.file!.id)).text()).toBe(content);
  });
});
