// Webhooks through the real process, checked by the official `openai` client's verifier: OpenAI's event shape and
// types, the Standard Webhooks signature, retries under one event id, and delivery after a kill -9 that came between
// the batch's final status and the delivery.
import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import OpenAI, { InvalidWebhookSignatureError } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../../testkit/batch-client.js";
import { completionJsonl } from "../../testkit/workload.js";
import { uploadJsonl } from "../helpers/http-batches.js";
import type { ServerProcess } from "../helpers/process.js";
import { serverTestbed } from "../helpers/server-testbed.js";
import { openaiClient, waitForBatch } from "../helpers/service.js";

interface Delivery {
  body: string;
  headers: Record<string, string>;
}

/** A receiver on loopback that records every delivery and answers from `statuses` (then 200). */
async function startReceiver() {
  const deliveries: Delivery[] = [];
  const statuses: number[] = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (c) => {
      body += c;
    });
    req.on("end", () => {
      deliveries.push({ body, headers: req.headers as Record<string, string> });
      res.statusCode = statuses.shift() ?? 200;
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/hooks`, deliveries, statuses, close: () => new Promise((r) => server.close(r)) };
}

const secret = `whsec_${randomBytes(32).toString("base64")}`;
const verifier = new OpenAI({ apiKey: "unused", webhookSecret: secret });

describe("webhooks (one process)", () => {
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let server: ServerProcess;
  const bed = serverTestbed("webhooks");

  beforeAll(async () => {
    receiver = await startReceiver();
    server = await bed.start({ WEBHOOK_URL: receiver.url, WEBHOOK_SECRET: secret, SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "0" });
  }, 60_000);
  afterAll(async () => {
    server?.child.kill("SIGKILL");
    await receiver?.close();
  });

  const eventsOf = (batchId: string) => receiver.deliveries.filter((d) => JSON.parse(d.body).data?.id === batchId);
  /** A completions batch of `n` lines, created and run to its end. */
  async function runBatch(n: number, prefix: string, maxTokens: number) {
    const file = await uploadJsonl(server.baseUrl, completionJsonl(n, { prefix, maxTokens }));
    const batch = await openaiClient(server).batches.create({
      input_file_id: file.id,
      endpoint: "/v1/completions",
      completion_window: "24h",
    });
    await waitForBatch(server.baseUrl, batch.id);
    return batch;
  }

  it("sends batch.completed, signed so that the official client's unwrap accepts it, and a wrong secret is refused", async () => {
    const batch = await runBatch(3, "wh", 4);
    const [d] = await until("the event", () => (eventsOf(batch.id).length > 0 ? eventsOf(batch.id) : undefined));
    const event = await verifier.webhooks.unwrap(d.body, d.headers, secret);
    expect(event).toMatchObject({ object: "event", type: "batch.completed", data: { id: batch.id } });
    expect(event.id).toMatch(/^evt_[0-9a-f]+$/);
    expect(d.headers["webhook-id"]).toBe(event.id);
    expect(Math.abs(Number(d.headers["webhook-timestamp"]) - Date.now() / 1000)).toBeLessThan(30);
    const wrong = `whsec_${randomBytes(32).toString("base64")}`;
    await expect(verifier.webhooks.unwrap(d.body, d.headers, wrong)).rejects.toBeInstanceOf(InvalidWebhookSignatureError);
    const tampered = d.body.replace(batch.id, "batch_000000000000000000000000");
    await expect(verifier.webhooks.unwrap(tampered, d.headers, secret)).rejects.toBeInstanceOf(InvalidWebhookSignatureError);
  });

  it("sends batch.failed for a file that fails validation, and batch.cancelled for a cancel", async () => {
    const bad = await uploadJsonl(server.baseUrl, "not json\n");
    const client = openaiClient(server);
    const failed = await client.batches.create({ input_file_id: bad.id, endpoint: "/v1/completions", completion_window: "24h" });
    const [f] = await until("batch.failed", () => (eventsOf(failed.id).length > 0 ? eventsOf(failed.id) : undefined));
    expect((await verifier.webhooks.unwrap(f.body, f.headers)).type).toBe("batch.failed");

    const file = await uploadJsonl(server.baseUrl, completionJsonl(40, { prefix: "wc", maxTokens: 64 }));
    const running = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" });
    await client.batches.cancel(running.id);
    await waitForBatch(server.baseUrl, running.id);
    const [c] = await until("batch.cancelled", () => (eventsOf(running.id).length > 0 ? eventsOf(running.id) : undefined));
    expect((await verifier.webhooks.unwrap(c.body, c.headers)).type).toBe("batch.cancelled");
  });

  it("retries a receiver that answers 500 three times, under the same event id, and counts each attempt", async () => {
    receiver.statuses.push(500, 500, 500);
    const batch = await runBatch(2, "wr", 2);
    const all = await until("four attempts", () => (eventsOf(batch.id).length >= 4 ? eventsOf(batch.id) : undefined));
    expect(new Set(all.map((d) => d.headers["webhook-id"])).size).toBe(1);
    for (const d of all) expect(await verifier.webhooks.unwrap(d.body, d.headers)).toMatchObject({ data: { id: batch.id } });
    // Backoff: 1, 2 then 4 seconds between the attempts. The receiver sees the last attempt before the sender has
    // its answer and counts it, so the count is awaited.
    const delivered = /obi_webhook_deliveries_total\{outcome="delivered"\} [4-9]/;
    const metrics = await until("the delivery counted", async () => {
      const text = await (await fetch(`${server.baseUrl}/metrics`)).text();
      return delivered.test(text) ? text : undefined;
    });
    expect(metrics).toMatch(/obi_webhook_deliveries_total\{outcome="failed"\} 3/);
    await new Promise((r) => setTimeout(r, 1500));
    expect(eventsOf(batch.id)).toHaveLength(4);
  }, 60_000);

  it("delivers after a kill -9 between the final status and a successful delivery, with the same event id", async () => {
    receiver.statuses.push(...Array(1000).fill(503));
    const batch = await runBatch(2, "wk", 2);
    const [first] = await until("a refused attempt", () => (eventsOf(batch.id).length > 0 ? eventsOf(batch.id) : undefined));
    server.child.kill("SIGKILL");
    await server.exited;
    receiver.statuses.length = 0;
    server = await bed.start({ WEBHOOK_URL: receiver.url, WEBHOOK_SECRET: secret, SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "0" });
    const delivered = await until("the delivery after the restart", () => {
      const after = eventsOf(batch.id).slice(1);
      return after.length > 0 ? after : undefined;
    });
    for (const d of delivered) expect(d.headers["webhook-id"]).toBe(first.headers["webhook-id"]);
    expect((await verifier.webhooks.unwrap(delivered[0].body, delivered[0].headers)).type).toBe("batch.completed");
  }, 60_000);
});
