// /v1/batches, /results and the operational routes through the real app, control plane and engine.
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { completionJsonl } from "../../testkit/workload.js";
import { startTestService, type TestService, waitForBatch } from "../helpers/service.js";

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => svc?.close());

const app = () => svc.service.app;

async function uploadLines(content: string): Promise<string> {
  const res = await request(app()).post("/v1/files").field("purpose", "batch").attach("file", Buffer.from(content), "in.jsonl");
  expect(res.status).toBe(200);
  return res.body.id;
}

describe("POST /v1/batches (file form)", () => {
  it("creates a batch, runs it, and serves its results as a list and as JSONL", async () => {
    const fileId = await uploadLines(completionJsonl(3, { prefix: "c", maxTokens: 4 }));
    const res = await request(app())
      .post("/v1/batches")
      .send({ input_file_id: fileId, endpoint: "/v1/completions", completion_window: "2h", metadata: { suite: "routes" } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      object: "batch",
      input_file_id: fileId,
      endpoint: "/v1/completions",
      completion_window: "2h",
      metadata: { suite: "routes" },
    });
    expect(res.body.deadline_at - res.body.submitted_at).toBe(7200);

    const done = await waitForBatch(svc.baseUrl, res.body.id);
    expect(done.status).toBe("completed");
    expect((await request(app()).get(`/v1/batches/${done.id}`)).body).toEqual(done);

    const list = await request(app()).get(`/v1/batches/${done.id}/results`);
    expect(list.status).toBe(200);
    expect(list.body.object).toBe("list");
    expect(list.body.data.map((o: any) => o.custom_id).sort()).toEqual(["c-0", "c-1", "c-2"]);
    expect(list.body.data[0].response.body.object).toBe("text_completion");

    const raw = await request(app())
      .get(`/v1/batches/${done.id}/results?format=jsonl`)
      .buffer(true)
      .parse((r, cb) => {
        let s = "";
        r.on("data", (c: Buffer) => (s += c.toString()));
        r.on("end", () => cb(null, s));
      });
    expect(raw.headers["content-type"]).toMatch(/^application\/jsonl/);
    const rows = (raw.body as string)
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(rows).toEqual(list.body.data);
    expect((await request(app()).get(`/v1/batches/${done.id}/results?format=xml`)).body.error.param).toBe("format");
  });

  it("answers 404 for results that do not exist (yet)", async () => {
    // A file whose lines are all invalid fails validation, so it never has results.
    const fileId = await uploadLines("{not json\n");
    const created = (await request(app()).post("/v1/batches").send({ input_file_id: fileId, endpoint: "/v1/completions" })).body;
    const failed = await waitForBatch(svc.baseUrl, created.id);
    expect(failed.status).toBe("failed");
    const res = await request(app()).get(`/v1/batches/${failed.id}/results`);
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe("results_not_ready");
    expect((await request(app()).get("/v1/batches/batch_000000000000000000000000/results")).body.error.code).toBe("not_found");
    // A POST-only path of ours read with GET is said as that, not as a batch id not found.
    const plan = await request(app()).get("/v1/batches/plan");
    expect(plan.status).toBe(404);
    expect(plan.body.error).toMatchObject({ code: "unknown_url", message: "Invalid URL (GET /v1/batches/plan): it takes POST." });
  });

  it("says a completed batch's results were deleted with its output file, not that they are not ready yet", async () => {
    const fileId = await uploadLines(completionJsonl(1, { prefix: "d", maxTokens: 2 }));
    const created = (await request(app()).post("/v1/batches").send({ input_file_id: fileId, endpoint: "/v1/completions" })).body;
    const done = await waitForBatch(svc.baseUrl, created.id);
    expect(done.status).toBe("completed");
    expect((await request(app()).delete(`/v1/files/${done.output_file_id}`)).status).toBe(200);
    for (const route of ["results", "output"]) {
      const res = await request(app()).get(`/v1/batches/${done.id}/${route}`);
      expect(res.status, route).toBe(404);
      expect(res.body.error.code, route).toBe("output_gone");
      expect(res.body.error.message, route).toContain("its output file has been deleted or has expired");
      expect(res.body.error.message, route).not.toMatch(/yet/);
    }
  });

  it("names the offending parameter of a bad request", async () => {
    const fileId = await uploadLines(completionJsonl(1, { prefix: "c", maxTokens: 4 }));
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ input_file_id: fileId, endpoint: "/v1/moderations" }, "endpoint"],
      [{ input_file_id: fileId, endpoint: "/v1/completions", completion_window: "tomorrow" }, "completion_window"],
      [{ input_file_id: fileId, endpoint: "/v1/completions", completion_window: "400d" }, "completion_window"],
      [
        {
          input_file_id: fileId,
          endpoint: "/v1/completions",
          metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])),
        },
        "metadata",
      ],
      [{ endpoint: "/v1/completions" }, "input_file_id"],
    ];
    for (const [body, param] of cases) {
      const res = await request(app()).post("/v1/batches").send(body);
      expect(res.status, param).toBe(400);
      expect(res.body.error, param).toMatchObject({ type: "invalid_request_error", param });
    }
    const missing = await request(app())
      .post("/v1/batches")
      .send({ input_file_id: "file-000000000000000000000000", endpoint: "/v1/completions" });
    expect(missing.status).toBe(404);
    expect(missing.body.error.param).toBe("input_file_id");
    const broken = await request(app()).post("/v1/batches").set("content-type", "application/json").send('{"input_file_id": "file-');
    expect(broken.status).toBe(400);
    expect(broken.body.error.code).toBe("invalid_json");
  });
});

describe("POST /v1/batches (inline form)", () => {
  it("turns the inline form's body into a completions batch", async () => {
    const res = await request(app())
      .post("/v1/batches")
      .send({ model: "tiny", input: [{ prompt: "Once upon a time" }, { prompt: "The dog" }], max_tokens: 4, metadata: { from: "inline" } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      object: "batch",
      endpoint: "/v1/completions",
      completion_window: "24h",
      metadata: { from: "inline" },
    });
    const done = await waitForBatch(svc.baseUrl, res.body.id);
    expect(done.request_counts).toEqual({ completed: 2, failed: 0, total: 2 });
    const results = (await request(app()).get(`/v1/batches/${done.id}/results`)).body.data;
    expect(results.map((r: any) => r.custom_id).sort()).toEqual(["request-1", "request-2"]);
    // The one model served answers whatever the body named, and says so.
    expect(results[0].response.body.model).toBe(svc.service.backend.info.model);
  });

  // A web page of any site may send a form's body without asking first: it is not read as JSON.
  it("curl -d without a Content-Type (a form's body) is a 415 that says to send application/json", async () => {
    const res = await request(app())
      .post("/v1/batches")
      .set("content-type", "application/x-www-form-urlencoded")
      .send(JSON.stringify({ input: [{ prompt: "Hi" }], max_tokens: 2 }));
    expect(res.status).toBe(415);
    expect(res.body.error).toMatchObject({ code: "unsupported_media_type", param: null });
    expect(res.body.error.message).toMatch(/Content-Type: application\/json/);
  });

  it("explains what is wrong with the items", async () => {
    const mixed = await request(app())
      .post("/v1/batches")
      .send({ input: [{ prompt: "a" }, { input: "b" }] });
    expect(mixed.status).toBe(400);
    expect(mixed.body.error.param).toBe("input[1].input");
    const notArray = await request(app()).post("/v1/batches").send({ input: "hello" });
    expect(notArray.body.error.param).toBe("input");
  });
});

describe("GET /v1/batches and cancel", () => {
  it("pages with after/limit and checks the limit", async () => {
    const fileId = await uploadLines(completionJsonl(1, { prefix: "c", maxTokens: 4 }));
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push((await request(app()).post("/v1/batches").send({ input_file_id: fileId, endpoint: "/v1/completions" })).body.id);
    const first = (await request(app()).get("/v1/batches?limit=2")).body;
    expect(first).toMatchObject({ object: "list", has_more: true });
    expect(first.data).toHaveLength(2);
    expect(first.last_id).toBe(first.data[1].id);
    const second = (await request(app()).get(`/v1/batches?limit=2&after=${first.last_id}`)).body;
    expect(second.data[0].id).not.toBe(first.data[1].id);
    for (const limit of ["0", "101", "x"]) {
      const res = await request(app()).get(`/v1/batches?limit=${limit}`);
      expect(res.status).toBe(400);
      expect(res.body.error.param).toBe("limit");
    }
    for (const id of ids) await waitForBatch(svc.baseUrl, id);
  });

  it("refuses a query parameter a route does not take, naming it and the one it likely meant", async () => {
    const id = "batch_000000000000000000000000";
    for (const [route, param, meant] of [
      ["/v1/batches?limt=2", "limt", "limit"],
      ["/v1/files?ordr=asc", "ordr", "order"],
      [`/v1/batches/${id}/table?fromat=csv`, "fromat", "format"],
      [`/v1/batches/${id}/results?formt=jsonl`, "formt", "format"],
      [`/v1/batches/${id}/output?aftr=3`, "aftr", "after"],
      ["/v1/messages/batches?limits=2", "limits", "limit"],
      ["/console/api/batches?stauts=failed", "stauts", "status"],
    ]) {
      const res = await request(app()).get(route);
      expect(res.status, route).toBe(400);
      const error = res.body.error;
      // Anthropic's error shape has no param; the message names it.
      if (!route.startsWith("/v1/messages")) expect(error.param, route).toBe(param);
      expect(error.message, route).toMatch(
        new RegExp(`^Unknown parameter: '${param}' \\(did you mean '${meant}'\\?\\)\\. This endpoint takes `),
      );
    }
    expect((await request(app()).get("/v1/batches?fizz=1")).body.error.message).toBe(
      "Unknown parameter: 'fizz'. This endpoint takes after, limit, api_key_id.",
    );
  });

  it("cancels a running batch and 404s unknown or malformed ids", async () => {
    const fileId = await uploadLines(completionJsonl(30, { prefix: "c", maxTokens: 200 }));
    const created = (await request(app()).post("/v1/batches").send({ input_file_id: fileId, endpoint: "/v1/completions" })).body;
    const res = await request(app()).post(`/v1/batches/${created.id}/cancel`);
    expect(res.status).toBe(200);
    expect(["cancelling", "cancelled"]).toContain(res.body.status);
    expect((await waitForBatch(svc.baseUrl, created.id)).status).toBe("cancelled");

    expect((await request(app()).post("/v1/batches/batch_000000000000000000000000/cancel")).status).toBe(404);
    for (const p of ["/v1/batches/..%2F..%2Fetc", "/v1/batches/batch_..%2Fx/cancel", "/v1/batches/file-6a1f0c2e9b7d4e3f8a5b1c0d"]) {
      const r = p.endsWith("cancel") ? await request(app()).post(p) : await request(app()).get(p);
      expect(r.status, p).toBe(404);
    }
  });
});

describe("operational and system routes", () => {
  it("reports queue stats and the simulated pools", async () => {
    const q = await request(app()).get("/queue/stats");
    expect(q.body).toEqual({ depth: expect.any(Number), max_depth: 100, running: expect.any(Number) });
    const pools = (await request(app()).get("/pools")).body;
    expect(pools.simulated).toBe(true);
    expect(pools.pools.map((p: any) => p.name).sort()).toEqual(["dedicated", "spot"]);
    for (const p of pools.pools)
      expect(p).toEqual({
        name: p.name,
        capacity: expect.any(Number),
        in_use: expect.any(Number),
        available: expect.any(Number),
        preempted: 0,
        preempted_until: null,
        preemptions: 0,
        jobs: expect.any(Array),
      });
  });

  it("answers the banner, health and readiness with the engine's info", async () => {
    expect((await request(app()).get("/")).body).toMatchObject({
      status: "ok",
      service: "offline-batch-inference",
      version: expect.any(String),
    });
    expect((await request(app()).get("/health")).body).toEqual({ status: "ok" });
    const ready = await request(app()).get("/ready");
    expect(ready.status).toBe(200);
    expect(ready.body).toMatchObject({
      status: "ready",
      model: svc.service.backend.info.model,
      backend: {
        kind: "local",
        endpoints: [
          "/v1/chat/completions",
          "/v1/completions",
          "/v1/embeddings",
          "/v1/rerank",
          "/v1/score",
          "/v1/responses",
          "/v1/messages",
        ],
        settings: { contextSize: 512, ranking: false },
      },
    });
  });

  it("echoes a sane x-request-id and replaces an unsafe one", async () => {
    expect((await request(app()).get("/health").set("x-request-id", "abc-123")).headers["x-request-id"]).toBe("abc-123");
    const odd = (await request(app()).get("/health").set("x-request-id", "bad id\twith spaces")).headers["x-request-id"];
    expect(odd).toMatch(/^req_[0-9a-f]{32}$/);
  });
});

describe("simulated spot preemption (last: the spot capacity stays gone for its cooldown)", () => {
  it("POST /pools/spot/preempt takes the spot slots away and says what was preempted", async () => {
    const res = await request(app()).post("/pools/spot/preempt");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ simulated: true, pool: "spot", preempted: [], cooldown_seconds: 60 });
    const spot = res.body.pools.find((p: any) => p.name === "spot");
    expect(spot).toMatchObject({ preempted: spot.capacity, available: 0 });
  });
});
