// GET /metrics over HTTP: open for a scraper, and each key's series (who the tenants are, what each used) only for
// a scrape that presents an admin key, or where no keys are configured and the API is open.
import express from "express";
import request from "supertest";
import { describe, expect, it } from "vitest";
import { errorHandler } from "../../api/http/error-handler.js";
import { metricsRouter } from "../../api/routes/metrics.js";
import { type ApiKey, bareKey, sha256Hex } from "../../config/keys.js";
import { createMetrics } from "../../metrics/metrics.js";

const key = (id: string, admin: boolean): ApiKey => ({ ...bareKey(`sk-test-${id}`), id, admin, sha256: sha256Hex(`sk-test-${id}`) });
const OPS = key("ops", true);
const TEAM_A = key("teamA", false);

function app(keys: ApiKey[]) {
  const m = createMetrics({ defaultMetrics: false });
  m.watch({
    queueStats: () => ({ depth: 0, max_depth: 10 }),
    poolStatus: () => [],
    totals: async () => ({ [`key_tokens:${TEAM_A.owner}|tiny|output`]: 42, "batches:completed": 1 }),
    keyName: (owner) => (owner === TEAM_A.owner ? "teamA" : owner),
    enqueued: async () => [{ key: "teamA", model: "tiny", tokens: 7 }],
  });
  const a = express();
  a.use(metricsRouter(m, keys));
  a.use(errorHandler({ maxFileBytes: 0 }));
  return a;
}
const scrape = (a: express.Express, secret?: string) => {
  const r = request(a).get("/metrics");
  return secret ? r.set("authorization", `Bearer ${secret}`) : r;
};

describe("GET /metrics", () => {
  it("gives each key's series to an admin key's scrape only", async () => {
    const a = app([OPS, TEAM_A]);
    const open = await scrape(a);
    expect(open.status).toBe(200);
    expect(open.text).toMatch(/obi_batches_total\{status="completed"\} 1/);
    expect(open.text).not.toMatch(/obi_key_|teamA/);
    const tenant = await scrape(a, "sk-test-teamA");
    expect(tenant.status).toBe(200);
    expect(tenant.text).not.toMatch(/obi_key_|teamA/);
    const admin = await scrape(a, "sk-test-ops");
    expect(admin.text).toMatch(/obi_key_tokens_total\{key="teamA",model="tiny",kind="output"\} 42/);
    expect(admin.text).toMatch(/obi_key_enqueued_tokens\{key="teamA",model="tiny"\} 7/);
    expect(admin.text).toMatch(/obi_batches_total\{status="completed"\} 1/);
    const wrong = await scrape(a, "sk-test-nobody");
    expect(wrong.status).toBe(401);
    expect(wrong.body.error).toMatchObject({ code: "invalid_api_key" });
  });

  it("gives them to everyone where no keys are configured (the API is open)", async () => {
    expect((await scrape(app([]))).text).toMatch(/obi_key_enqueued_tokens\{key="teamA",model="tiny"\} 7/);
  });
});
