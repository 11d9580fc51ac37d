// Queue bound, SLA ordering and pool choice, through HTTP with one slot in the simulated pool.
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type TestService, waitForBatch } from "../helpers/service.js";

let svc: TestService;
beforeAll(async () => {
  // Yielding is off: with it, the waiting urgent job may make the spot shard yield (as it should, tested in
  // tests/batches/sla-yield.sys.test.ts) before the test frees the dedicated pool, and this test is about the queue.
  svc = await startTestService({
    MAX_QUEUE_DEPTH: "2",
    SPOT_CAPACITY: "1",
    DEDICATED_CAPACITY: "1",
    SLA_URGENT_SECONDS: "3600",
    SLA_YIELD: "false",
  });
});
afterAll(async () => svc?.close());

async function upload(lines: number, maxTokens: number) {
  const content = Array.from({ length: lines }, (_, i) =>
    JSON.stringify({
      custom_id: `r${i}`,
      method: "POST",
      url: "/v1/completions",
      body: { model: "m", prompt: `Once upon a time ${i}`, max_tokens: maxTokens },
    }),
  ).join("\n");
  const res = await request(svc.service.app).post("/v1/files").field("purpose", "batch").attach("file", Buffer.from(content), "in.jsonl");
  expect(res.status).toBe(200);
  return res.body.id as string;
}

const create = (fileId: string, window = "24h") =>
  request(svc.service.app).post("/v1/batches").send({ input_file_id: fileId, endpoint: "/v1/completions", completion_window: window });

describe("queue and scheduler", () => {
  it("bounds the queue with 429 + Retry-After, takes urgent jobs first, and releases pools on every end", async () => {
    const long = await upload(400, 200);
    const short = await upload(2, 4);
    // Two long jobs occupy spot and then dedicated (fallback); the rest wait in the queue.
    const a = (await create(long)).body;
    const b = (await create(long)).body;
    await new Promise((r) => setTimeout(r, 300));
    const c = (await create(short)).body; // normal: 24h window
    const d = (await create(short, "30m")).body; // urgent: deadline within SLA_URGENT_SECONDS
    const refused = await create(short);
    expect(refused.status).toBe(429);
    expect(refused.headers["retry-after"]).toMatch(/^\d+$/);
    expect(refused.body.error).toMatchObject({ type: "rate_limit_error" });

    const stats = (await request(svc.service.app).get("/queue/stats")).body;
    expect(stats).toMatchObject({ depth: 2, max_depth: 2 });
    const pools = JSON.stringify((await request(svc.service.app).get("/pools")).body);
    expect(pools).toContain(a.id);

    // Free the pools: a cancel is an end too, and must release capacity.
    // b holds the dedicated pool: freeing it first lets the urgent job take its preferred pool.
    await request(svc.service.app).post(`/v1/batches/${b.id}/cancel`);
    await waitForBatch(svc.baseUrl, b.id);
    await request(svc.service.app).post(`/v1/batches/${a.id}/cancel`);
    const [ca, cb, cc, cd] = await Promise.all([a, b, c, d].map((x) => waitForBatch(svc.baseUrl, x.id)));
    expect(ca.status).toBe("cancelled");
    expect(cb.status).toBe("cancelled");
    expect(new Set([ca.pool, cb.pool])).toEqual(new Set(["spot", "dedicated"]));
    expect(cc.status).toBe("completed");
    expect(cd.status).toBe("completed");
    // The urgent job, submitted later, started no later than the normal one and ran on the dedicated pool.
    expect(cd.in_progress_at).toBeLessThanOrEqual(cc.in_progress_at);
    expect(cd.pool).toBe("dedicated");

    const after = (await request(svc.service.app).get("/pools")).body;
    expect(JSON.stringify(after)).not.toContain(a.id);
  });
});
