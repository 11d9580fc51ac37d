// / for browsers and for JSON clients, and /status.json (what the page polls), on the real service.
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type TestService, waitForBatch } from "../helpers/service.js";

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ API_KEYS: "key-a,key-b" });
});
afterAll(async () => svc?.close());

const app = () => svc.service.app;
const line = JSON.stringify({ custom_id: "a", method: "POST", url: "/v1/completions", body: { prompt: "Once", max_tokens: 2 } });

async function submit(key: string) {
  const file = await request(app())
    .post("/v1/files")
    .set("Authorization", `Bearer ${key}`)
    .field("purpose", "batch")
    .attach("file", Buffer.from(line), "in.jsonl");
  const res = await request(app())
    .post("/v1/batches")
    .set("Authorization", `Bearer ${key}`)
    .send({ input_file_id: file.body.id, endpoint: "/v1/completions", completion_window: "24h" });
  return res.body;
}

describe("GET /", () => {
  it("keeps the JSON banner for JSON clients and curl", async () => {
    for (const accept of ["application/json", "*/*", undefined]) {
      const req = request(app()).get("/");
      const res = await (accept ? req.set("Accept", accept) : req);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ status: "ok", service: "offline-batch-inference", version: expect.any(String) });
    }
  });

  it("serves the console to a browser, with no key and no external assets: every file it loads comes from here", async () => {
    const res = await request(app()).get("/").set("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8");
    expect(res.status).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^text\/html/);
    expect(res.text).toContain("console.js");
    expect(res.text).not.toMatch(/(src|href)="(https?:)?\/\//);
    const loaded = [...res.text.matchAll(/(?:src|href)="([^"#][^"]*)"/g)].map((m) => m[1]);
    expect(loaded).toEqual(expect.arrayContaining(["console.js", "console.css", "assets/uplot.js", "assets/uplot.css", "favicon.ico"]));
    // The entry script is an ES module: every module it imports, and theirs, is served from here too.
    const files = [...loaded];
    for (let i = 0; i < files.length; i++) {
      const asset = await request(app()).get(`/${files[i]}`);
      expect(asset.status, files[i]).toBe(200);
      expect(asset.body.length || asset.text.length, files[i]).toBeGreaterThan(100);
      if (files[i].endsWith(".js") && !files[i].startsWith("assets/"))
        for (const m of asset.text.matchAll(/from "\.\/([\w.-]+\.js)"/g)) if (!files.includes(m[1])) files.push(m[1]);
    }
    expect(files).toEqual(expect.arrayContaining(["console-api.js", "console-list.js", "console-batch.js", "console-charts.js"]));
    // What it reads needs the key, as /v1 does.
    expect((await request(app()).get("/console/api/overview")).status).toBe(401);
    expect((await request(app()).get("/console/api/batches")).status).toBe(401);
  });
});

describe("GET /status.json", () => {
  it("needs a key when keys are on, and shows each key its own batches only", async () => {
    expect((await request(app()).get("/status.json")).status).toBe(401);
    const a = await submit("key-a");
    const b = await submit("key-b");
    await waitForBatch(svc.baseUrl, a.id, 30_000, { Authorization: "Bearer key-a" });
    await waitForBatch(svc.baseUrl, b.id, 30_000, { Authorization: "Bearer key-b" });
    const res = await request(app()).get("/status.json").set("Authorization", "Bearer key-a");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      service: { name: "offline-batch-inference" },
      model: svc.service.backend.info.model,
      queue: { depth: 0, max_depth: svc.config.maxQueueDepth, running: 0 },
      pools_simulated: true,
      has_more: false,
    });
    expect(res.body.pools.map((p: { name: string }) => p.name)).toEqual(["spot", "dedicated"]);
    expect(res.body.batches.map((x: { id: string }) => x.id)).toEqual([a.id]);
    expect(res.body.batches[0]).toMatchObject({
      status: "completed",
      pool: "spot",
      deadline_met: true,
      request_counts: { completed: 1, total: 1 },
    });
  });
});
