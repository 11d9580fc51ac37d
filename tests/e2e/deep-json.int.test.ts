// Bodies nested thousands deep, through the real service and engine: every endpoint and every way in (a synchronous
// request, a batch line, the inline form, Anthropic's message batches) answers a 400 naming the field and the
// nesting bound, never a 500 nor the engine's own words, while the rest of the batch runs.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";
import { MAX_JSON_DEPTH } from "../../openai/json-depth.js";
import { createBatch } from "../../testkit/batch-client.js";
import { uploadJsonl } from "../helpers/http-batches.js";
import { startTestService, type TestService, waitForBatch } from "../helpers/service.js";

let svc: TestService;
beforeAll(async () => {
  // The generated model's template has a tool-call format, so a chat line with tools runs.
  svc = await startTestService({ MODEL_PATH: await ensureGeneratedModel(), CONTEXT_SIZE: "1024" });
});
afterAll(async () => svc?.close());

/** A JSON schema `levels` objects deep, written as text: JSON.stringify itself overflows on a value this deep. */
const schema = (levels: number) => `${'{"type":"object","properties":{"a":'.repeat(levels)}{"type":"string"}${"}}".repeat(levels)}`;
const USER = '[{"role":"user","content":"Hi"}]';

const post = (path: string, body: string) =>
  fetch(`${svc.baseUrl}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body });

/** A 400 naming `param` and the bound, with nothing of the engine's own. */
async function expectRefused(res: Response, param: string) {
  const text = await res.text();
  expect(res.status, text.slice(0, 300)).toBe(400);
  expect(text).not.toMatch(/call stack|RangeError|internal/i);
  const error = JSON.parse(text).error;
  expect(error.message).toContain(`'${param}'`);
  expect(error.message).toContain(`more than ${MAX_JSON_DEPTH} levels deep`);
  return error;
}

describe("a body nested thousands deep", () => {
  it("is a 400 naming the field on every synchronous endpoint, whatever the depth", async () => {
    for (const levels of [40, 2_600, 3_000]) {
      const format = `{"type":"json_schema","json_schema":{"name":"deep","schema":${schema(levels)}}}`;
      const chat = await post("/v1/chat/completions", `{"model":"m","max_tokens":4,"messages":${USER},"response_format":${format}}`);
      expect(await expectRefused(chat, "response_format"), `${levels}`).toMatchObject({
        type: "invalid_request_error",
        code: "nesting_too_deep",
        param: "response_format",
      });
    }
    const text = `{"format":{"type":"json_schema","name":"deep","schema":${schema(3_000)}}}`;
    const responses = await post("/v1/responses", `{"model":"m","max_output_tokens":4,"input":"Hi","text":${text}}`);
    expect(await expectRefused(responses, "text")).toMatchObject({ code: "nesting_too_deep", param: "text" });
    const output = `{"format":{"type":"json_schema","schema":${schema(3_000)}}}`;
    const messages = await post("/v1/messages", `{"model":"m","max_tokens":4,"messages":${USER},"output_config":${output}}`);
    // Anthropic's envelope on its route.
    expect((await expectRefused(messages, "output_config")).type).toBe("invalid_request_error");
    const tools = `[{"type":"function","function":{"name":"f","parameters":${schema(3_000)}}}]`;
    const withTools = await post("/v1/chat/completions", `{"model":"m","max_tokens":4,"messages":${USER},"tools":${tools}}`);
    expect((await expectRefused(withTools, "tools")).param).toBe("tools");
    const content = `[{"role":"user","content":${"[".repeat(3_000)}${"]".repeat(3_000)}}]`;
    expect((await expectRefused(await post("/v1/chat/completions", `{"model":"m","messages":${content}}`), "messages")).param).toBe(
      "messages",
    );
  });

  it("fails only its own line of a batch, as a 400 naming the field; the other lines run", async () => {
    const format = `{"type":"json_schema","json_schema":{"name":"deep","schema":${schema(3_000)}}}`;
    const line = (id: string, extra: string) =>
      `{"custom_id":"${id}","method":"POST","url":"/v1/chat/completions","body":{"model":"m","max_tokens":4,"messages":${USER}${extra}}}`;
    const file = await uploadJsonl(svc.baseUrl, `${line("deep", `,"response_format":${format}`)}\n${line("plain", "")}\n`);
    const created = await createBatch(svc.baseUrl, file.id, { endpoint: "/v1/chat/completions" });
    expect(created.status).toBe(200);
    const batch = await waitForBatch(svc.baseUrl, created.body.id);
    expect(batch).toMatchObject({ status: "completed", request_counts: { completed: 1, failed: 1, total: 2 } });
    const errors = (await (await fetch(`${svc.baseUrl}/v1/files/${batch.error_file_id}/content`)).text()).trim().split("\n");
    const failed = JSON.parse(errors[0]);
    expect(failed).toMatchObject({
      custom_id: "deep",
      response: { status_code: 400, body: { error: { code: "nesting_too_deep", param: "response_format" } } },
    });
    expect(JSON.stringify(failed)).not.toMatch(/call stack/i);
  });

  it("refuses the inline form and Anthropic's message batches at create, naming the field", async () => {
    const inline = await post("/v1/batches", `{"model":"m","input":[{"prompt":${"[".repeat(3_000)}1${"]".repeat(3_000)}}]}`);
    expect((await expectRefused(inline, "input")).code).toBe("nesting_too_deep");
    const output = `{"format":{"type":"json_schema","schema":${schema(3_000)}}}`;
    const params = `{"model":"m","max_tokens":4,"messages":${USER},"output_config":${output}}`;
    const created = await post("/v1/messages/batches", `{"requests":[{"custom_id":"deep","params":${params}}]}`);
    expect((await expectRefused(created, "requests")).type).toBe("invalid_request_error");
  });
});
