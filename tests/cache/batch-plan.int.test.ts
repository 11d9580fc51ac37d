// POST /v1/batches/plan on an in-process service with the generated model and a keys file: the plan's prompt tokens
// against the same file's batch usage (within 1%), repeats and a warm cache as cached lines, nothing queued or run
// by a plan, and the refusals a create gives (another key's file, an unknown field, a file that would fail).
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeKeysFile } from "../helpers/keys.js";
import { startTestService, type TestService, waitForClientBatch } from "../helpers/service.js";

const dir = mkdtempSync(path.join(os.tmpdir(), "obi-plan-"));
const { file: keysFile, auth } = writeKeysFile(dir, [{ id: "teamA" }, { id: "teamB" }]);

let svc: TestService;
const client = (id: string) =>
  new OpenAI({ baseURL: `${svc.baseUrl}/v1`, apiKey: auth[id].authorization.slice("Bearer ".length), maxRetries: 0 });
beforeAll(async () => {
  svc = await startTestService({ KEYS_FILE: keysFile });
}, 120_000);
afterAll(async () => {
  await svc?.close();
  rmSync(dir, { recursive: true, force: true });
});

const chatLine = (id: string, content: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    custom_id: id,
    method: "POST",
    url: "/v1/chat/completions",
    body: {
      model: "m",
      messages: [
        { role: "system", content: "You answer briefly." },
        { role: "user", content },
      ],
      max_tokens: 8,
      ...extra,
    },
  });

async function upload(key: string, lines: string[]) {
  return client(key).files.create({ file: await toFile(Buffer.from(lines.join("\n")), "in.jsonl"), purpose: "batch" });
}

async function plan(key: string, body: Record<string, unknown>): Promise<{ status: number; body: any }> {
  const res = await fetch(`${svc.baseUrl}/v1/batches/plan`, {
    method: "POST",
    headers: { ...auth[key], "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

const form = (input_file_id: string, extra: Record<string, unknown> = {}) => ({
  input_file_id,
  endpoint: "/v1/chat/completions",
  completion_window: "24h",
  ...extra,
});

async function queueAndEngine() {
  const stats = await (await fetch(`${svc.baseUrl}/queue/stats`, { headers: auth.teamA })).json();
  const list = await client("teamA").batches.list();
  return { stats, batches: list.data.length, steps: svc.service.backend.stats?.() ?? null };
}

describe("a batch's plan", () => {
  it("counts the prompt tokens the batch then reports, its repeats and warm answers as cached, and runs nothing", async () => {
    const lines = [
      chatLine("a", "Tell me a story about a cat.", { temperature: 0 }),
      chatLine("b", "Tell me a story about a cat.", { temperature: 0.0, max_tokens: 8 }),
      chatLine("c", "Another question entirely, please.", { temperature: 0 }),
      chatLine("d", "A sampled line is never collapsed.", { temperature: 0.8 }),
      chatLine("e", "A sampled line is never collapsed.", { temperature: 0.8 }),
    ];
    const f = await upload("teamA", lines);
    const before = await queueAndEngine();
    const cold = await plan("teamA", form(f.id));
    expect(cold.status).toBe(200);
    expect(cold.body).toMatchObject({
      object: "batch.plan",
      lines: 5,
      invalid_lines: 0,
      distinct_requests: 4,
      cached_lines: 1,
      tokenizer: "model",
    });
    expect(cold.body.max_output_tokens).toBe(5 * 8);
    expect(await queueAndEngine()).toEqual(before);

    const started = Date.now();
    const created = await client("teamA").batches.create(form(f.id) as never);
    const done = await waitForClientBatch(client("teamA"), created.id, 120_000);
    const ranSeconds = (Date.now() - started) / 1000;
    expect(done.status).toBe("completed");
    const used = done.usage!.input_tokens;
    expect(Math.abs(cold.body.input_tokens - used)).toBeLessThanOrEqual(Math.max(1, used * 0.01));
    console.log(
      `plan: input_tokens ${cold.body.input_tokens} vs batch usage ${used}; projected_seconds ${cold.body.projected_seconds} ` +
        `(rate ${cold.body.throughput.work_per_second}/s from ${cold.body.throughput.measured_batches} batches) vs ${ranSeconds.toFixed(1)} s run`,
    );

    // The greedy answers are stored now: every deterministic line is cached; the sampled lines still run.
    const warm = await plan("teamA", form(f.id));
    expect(warm.body).toMatchObject({ lines: 5, distinct_requests: 4, cached_lines: 3, input_tokens: cold.body.input_tokens });
    // Another key's scope holds none of them; metadata.cache off counts none and collapses nothing.
    const other = await plan("teamB", form((await upload("teamB", lines)).id));
    expect(other.body).toMatchObject({ distinct_requests: 4, cached_lines: 1 });
    const off = await plan("teamA", form(f.id, { metadata: { cache: "off" } }));
    expect(off.body).toMatchObject({ distinct_requests: 5, cached_lines: 0 });
  }, 240_000);

  it("projects from the rate measured on the batches this deployment finished (logged against a real run)", async () => {
    const sampled = (tag: string) =>
      Array.from({ length: 150 }, (_, i) => chatLine(`${tag}${i}`, `Line ${i} of ${tag}: go on.`, { temperature: 1, max_tokens: 48 }));
    const first = await client("teamA").batches.create(form((await upload("teamA", sampled("a"))).id) as never);
    const ran = await waitForClientBatch(client("teamA"), first.id, 180_000);
    expect(ran.status).toBe("completed");
    const ranSeconds = (ran.completed_at ?? 0) - (ran.in_progress_at ?? 0);

    const second = await upload("teamA", sampled("b"));
    const p = await plan("teamA", form(second.id));
    expect(p.status).toBe(200);
    // A batch that ran under two whole seconds says too little of a rate to be measured from.
    if (ranSeconds >= 2) expect(p.body.throughput.measured_batches).toBeGreaterThanOrEqual(1);
    else expect(p.body.throughput.measured_batches).toBe(0);
    expect(p.body.queue_ahead).toEqual({ batches: 0, lines: 0 });
    const started = Date.now();
    const b = await client("teamA").batches.create(form(second.id) as never);
    const done = await waitForClientBatch(client("teamA"), b.id, 180_000);
    expect(done.status).toBe("completed");
    console.log(
      `projected_seconds ${p.body.projected_seconds} (rate ${p.body.throughput.work_per_second}/s from ${p.body.throughput.measured_batches} ` +
        `batches, the first ran ${ranSeconds} s) vs the same-shaped batch's real ${((Date.now() - started) / 1000).toFixed(1)} s`,
    );
  }, 400_000);

  it("counts a Responses file as the chat it runs as, and a completions file by its prompts", async () => {
    const cases = [
      {
        endpoint: "/v1/responses",
        body: (i: number) => ({ model: "m", instructions: "Be brief.", input: `Question ${i}?`, max_output_tokens: 16, temperature: 0 }),
      },
      {
        endpoint: "/v1/completions",
        body: (i: number) => ({ model: "m", prompt: [`One ${i}`, `Two ${i}`], max_tokens: 4, temperature: 0 }),
      },
    ];
    for (const c of cases) {
      const lines = [0, 1, 2].map((i) => JSON.stringify({ custom_id: `r${i}`, method: "POST", url: c.endpoint, body: c.body(i) }));
      const f = await upload("teamB", lines);
      const p = await plan("teamB", form(f.id, { endpoint: c.endpoint }));
      expect(p.status, JSON.stringify(p.body)).toBe(200);
      expect(p.body.tokenizer).toBe("model");
      const b = await client("teamB").batches.create(form(f.id, { endpoint: c.endpoint }) as never);
      const done = await waitForClientBatch(client("teamB"), b.id, 120_000);
      expect(done.status).toBe("completed");
      const used = done.usage!.input_tokens;
      expect(Math.abs(p.body.input_tokens - used), `${c.endpoint}: plan ${p.body.input_tokens}, usage ${used}`).toBeLessThanOrEqual(
        Math.max(1, used * 0.01),
      );
    }
  }, 240_000);

  it("is refused as a create is: another key's file, an unknown field, a bad window, a file that would fail", async () => {
    const f = await upload("teamA", [chatLine("a", "hi")]);
    const theirs = await plan("teamB", form(f.id));
    expect(theirs.status).toBe(404);
    expect(theirs.body.error).toMatchObject({ param: "input_file_id" });

    const unknown = await plan("teamA", form(f.id, { input_fil_id: "x" }));
    expect(unknown.status).toBe(400);
    expect(JSON.stringify(unknown.body.error)).toContain("input_fil_id");

    const window = await plan("teamA", form(f.id, { completion_window: "2 days" }));
    expect(window.status).toBe(400);

    const bad = await upload("teamA", [chatLine("a", "hi"), "not json", chatLine("a", "again")]);
    const refused = await plan("teamA", form(bad.id));
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: "invalid_input_file", param: "input_file_id" });
    expect(refused.body.error.message).toContain("line 2");
    expect(refused.body.error.message).toContain("1 more");

    const noAuth = await fetch(`${svc.baseUrl}/v1/batches/plan`, {
      method: "POST",
      body: "{}",
      headers: { "content-type": "application/json" },
    });
    expect(noAuth.status).toBe(401);
  }, 120_000);
});
