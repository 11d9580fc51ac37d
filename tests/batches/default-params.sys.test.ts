// A batch's default_params and its model's defaults (the models file's), on real runs in both modes: they apply to
// each line that does not set them, under the line's own values, show on the batch object, and a default the
// endpoint would refuse is a 400 naming it.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testModelPath } from "../../testkit/model.js";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../testkit/postgres.js";
import { apiAndWorker, downloadResults } from "../helpers/cluster.js";
import { uploadJsonl } from "../helpers/http-batches.js";
import { openaiClient, startTestService, type TestService, waitForBatch } from "../helpers/service.js";

/** The distributed mode's settings: shards of 5 lines, so the defaults reach several. */
const COMMON = { SHARD_SIZE: "5", CHECKPOINT_SECONDS: "1", LEASE_SECONDS: "4" };

/** `n` completions lines; the even ones set max_tokens 6 themselves, the odd ones leave it to the defaults. */
function lines(n: number, prefix: string): string {
  return Array.from({ length: n }, (_, i) =>
    JSON.stringify({
      custom_id: `${prefix}-${i}`,
      method: "POST",
      url: "/v1/completions",
      body: { prompt: `Once upon a time ${i}`, ...(i % 2 === 0 ? { max_tokens: 6 } : {}) },
    }),
  ).join("\n");
}

async function create(baseUrl: string, text: string, extra: Record<string, unknown>) {
  const file = await uploadJsonl(baseUrl, text);
  return fetch(`${baseUrl}/v1/batches`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h", ...extra }),
  });
}

/** Runs 12 lines with the batch's defaults and returns each line's completion tokens by custom_id. */
async function tokensByLine(baseUrl: string, prefix: string, extra: Record<string, unknown>) {
  const res = await create(baseUrl, lines(12, prefix), extra);
  const created = await res.json();
  expect(res.status, JSON.stringify(created)).toBe(200);
  const done = await waitForBatch(baseUrl, created.id, 120_000);
  expect(done.request_counts, JSON.stringify(done.errors)).toEqual({ total: 12, completed: 12, failed: 0 });
  const { output } = await downloadResults({ baseUrl }, done);
  return { done, tokens: new Map(output.map((l) => [l.custom_id, l.response.body.usage.completion_tokens as number])) };
}

describe("default_params (embedded mode, with the model's defaults in a models file)", () => {
  let svc: TestService;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "obi-defaults-"));
    const file = path.join(dir, "models.yaml");
    // The model's own defaults: 4 tokens and temperature 0.
    writeFileSync(
      file,
      `default_model: tiny\nmodels:\n  - name: tiny\n    local: { path: ${await testModelPath()} }\n    defaults: { max_tokens: 4, temperature: 0 }\n`,
    );
    svc = await startTestService({ MODELS_FILE: file, MODEL_PATH: "" });
  }, 120_000);
  afterAll(async () => {
    await svc?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("fills what a line leaves out: the batch's defaults over the model's, the line's own values over both", async () => {
    const { done, tokens } = await tokensByLine(svc.baseUrl, "bd", { default_params: { max_tokens: 2 } });
    expect(done.default_params).toEqual({ max_tokens: 2, temperature: 0 });
    expect((await openaiClient(svc).batches.retrieve(done.id)).id).toBe(done.id);
    for (const [id, n] of tokens) expect(n, id).toBeLessThanOrEqual(Number(id.split("-")[1]) % 2 === 0 ? 6 : 2);
    expect(Math.max(...[...tokens].filter(([id]) => Number(id.split("-")[1]) % 2 === 0).map(([, n]) => n))).toBeGreaterThan(2);
    // Without the batch's: the model's 4.
    const model = await tokensByLine(svc.baseUrl, "md", {});
    expect(model.done.default_params).toEqual({ max_tokens: 4, temperature: 0 });
    for (const [id, n] of model.tokens) if (Number(id.split("-")[1]) % 2 === 1) expect(n, id).toBeLessThanOrEqual(4);
  }, 240_000);

  it("refuses a default the endpoint would refuse, naming it", async () => {
    const cases: Array<[unknown, string]> = [
      [{ temperature: "hot" }, "default_params.temperature"],
      [{ nonsense: 1 }, "default_params.nonsense"],
      [{ prompt: "x" }, "default_params.prompt"],
      [[1, 2], "default_params"],
    ];
    for (const [default_params, param] of cases) {
      const res = await create(svc.baseUrl, lines(2, "bad"), { default_params });
      const body = await res.json();
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(body.error.param).toBe(param);
      // Named once, as the batch's default.
      expect(body.error.message).toContain(`'${param}'`);
      expect(body.error.message.match(/Invalid '/g)?.length ?? 0).toBeLessThanOrEqual(1);
    }
  });
});

describe("default_params (distributed mode, sharded)", () => {
  const nodes = apiAndWorker("memory", COMMON, "w1");

  it("every shard's lines take the batch's defaults", async () => {
    const { done, tokens } = await tokensByLine(nodes.api.baseUrl, "dd", { default_params: { max_tokens: 1 } });
    expect(done.default_params).toEqual({ max_tokens: 1 });
    for (const [id, n] of tokens) expect(n, id).toBeLessThanOrEqual(Number(id.split("-")[1]) % 2 === 0 ? 6 : 1);
  }, 240_000);
});

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

describe.skipIf(!POSTGRES_BIN)("default_params (distributed mode on PostgreSQL and S3)", () => {
  const nodes = apiAndWorker("postgres", COMMON, "pg-defaults");

  it("the batch's own input copy in S3 carries the defaults to every shard", async () => {
    const { done, tokens } = await tokensByLine(nodes.api.baseUrl, "pgd", { default_params: { max_tokens: 1 } });
    expect(done.default_params).toEqual({ max_tokens: 1 });
    for (const [id, n] of tokens) expect(n, id).toBeLessThanOrEqual(Number(id.split("-")[1]) % 2 === 0 ? 6 : 1);
  }, 240_000);
});
