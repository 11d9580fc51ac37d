// Structured logs of a real service: request ids on request lines (x-request-id honoured), the
// scheduler's decisions (pool chosen, fallback) and the SLA markers, all at info.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import pino from "pino";
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot } from "../../testkit/repo-root.js";
import { startTestService, type TestService, waitForBatch } from "../helpers/service.js";

const run = promisify(execFile);

type Line = Record<string, any> & { level: number; msg: string };
const lines: Line[] = [];
let svc: TestService;

beforeAll(async () => {
  // No spot capacity: every batch falls back to the single dedicated slot, and a second one waits.
  const logger = pino({ level: "info" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
  svc = await startTestService({ SPOT_CAPACITY: "0", DEDICATED_CAPACITY: "1" }, { logger });
});
afterAll(async () => svc?.close());

const inline = (n: number, maxTokens: number) => ({
  completion_window: "24h",
  max_tokens: maxTokens,
  input: Array.from({ length: n }, (_, i) => ({ prompt: `Once ${i}` })),
});
const about = (id: string) => lines.filter((l) => l.batch_id === id);

describe("request logs", () => {
  it("tag every request line with req_id, reusing a well-formed x-request-id", async () => {
    const res = await request(svc.service.app).get("/v1/batches").set("x-request-id", "trace-123");
    expect(res.headers["x-request-id"]).toBe("trace-123");
    const access = lines.filter((l) => l.req_id === "trace-123");
    expect(access).toHaveLength(1);
    expect(access[0]).toMatchObject({ level: 30, req: { method: "GET", url: "/v1/batches" }, res: { statusCode: 200 } });

    const forged = await request(svc.service.app).get("/v1/files").set("x-request-id", "bad id\twith spaces");
    expect(forged.headers["x-request-id"]).toMatch(/^req_[0-9a-f]{32}$/);
    expect(lines.some((l) => l.req_id === forged.headers["x-request-id"])).toBe(true);
    // Every access line has its id at the top level.
    for (const l of lines.filter((x) => x.req)) expect(l.req_id).toEqual(expect.any(String));
  });

  it("keep health checks, metrics scrapes and the status page's polling out of the info log", async () => {
    const before = lines.length;
    for (const p of ["/health", "/ready", "/metrics", "/status.json", "/openapi.json"]) {
      expect((await request(svc.service.app).get(p)).status, p).toBe(200);
    }
    expect(lines.slice(before).filter((l) => l.req)).toEqual([]);
    // A failing probe still says so.
    await request(svc.service.app).get("/nope");
    expect(lines.slice(before).find((l) => l.req?.url === "/nope")).toMatchObject({ level: 40 });
  });
});

describe("scheduling and SLA logs", () => {
  it("log the pool chosen, the fallback and whether the deadline was met; a batch waits for a slot", async () => {
    const first = (await request(svc.service.app).post("/v1/batches").send(inline(8, 64))).body;
    const second = (await request(svc.service.app).post("/v1/batches").send(inline(1, 2))).body;
    await waitForBatch(svc.baseUrl, first.id);
    await waitForBatch(svc.baseUrl, second.id);

    const fallback = about(first.id).find((l) => /falls back to the dedicated pool/.test(l.msg));
    expect(fallback).toMatchObject({ level: 30, pool: "dedicated", urgent: false });
    const started = about(first.id).find((l) => l.msg === "batch started");
    expect(started).toMatchObject({ level: 30, pool: "dedicated", fallback: true, resumed: false, deadline_at: first.deadline_at });
    const ended = about(first.id).find((l) => l.msg === "batch completed");
    expect(ended).toMatchObject({ level: 30, status: "completed", pool: "dedicated", deadline_met: true });
    // The second batch waited for the one slot: it started only once the first's work was done.
    const freed = lines.indexOf(about(first.id).find((l) => l.msg === "shard finished")!);
    expect(freed).toBeGreaterThan(-1);
    expect(lines.indexOf(about(second.id).find((l) => l.msg === "batch started")!)).toBeGreaterThan(freed);
  });
});

describe("createLogger", () => {
  const logHello = (env: Record<string, string>) =>
    run(
      process.execPath,
      [
        "--import",
        "tsx",
        "-e",
        `import("./app/logger.ts").then(({ createLogger }) => createLogger("info").info({ batch_id: "b1" }, "hello"))`,
      ],
      {
        cwd: repoRoot,
        env: { ...process.env, ...env },
      },
    );

  it("prints JSON lines in production and readable lines in development", async () => {
    const prod = await logHello({ NODE_ENV: "production" });
    expect(JSON.parse(prod.stdout)).toMatchObject({ level: 30, msg: "hello", batch_id: "b1", service: "offline-batch-inference" });
    const dev = await logHello({ NODE_ENV: "development" });
    expect(dev.stdout).toMatch(/INFO.*hello/);
    expect(dev.stdout).toMatch(/batch_id\S*: "b1"/);
    expect(() => JSON.parse(dev.stdout)).toThrow();
  });
});
