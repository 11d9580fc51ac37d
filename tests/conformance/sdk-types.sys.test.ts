// Every object and body the service emits, validated at run time by the official Python SDK's pydantic types
// (tests/conformance/validate.py): batches, files, list pages, models, the error envelope, and each output line's
// body on every endpoint (chat with and without tools, logprobs, n and json_schema; completions, with a prompt
// echoed and scored too, whose first token's null the SDK's types do not allow: validate.py says how that is read;
// embeddings as floats and base64; responses with text, json_schema and tool calls). TypeScript types are not checked at run
// time, so only this sees a field the SDK requires and the service leaves out. Skips with a note where Python or
// its `openai` package is absent (.ci/run installs both into .venv).
import { execFileSync } from "node:child_process";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";
import { pythonWithOpenAI } from "../../testkit/python.js";
import { repoRoot } from "../../testkit/repo-root.js";
import { startTestService, type TestService, waitForBatch } from "../helpers/service.js";

const python = pythonWithOpenAI();
if (!python)
  console.warn("SDK conformance skipped: no Python with the openai package (python3 -m venv .venv && .venv/bin/pip install openai)");

const weather = {
  type: "object",
  properties: { city: { type: "string", enum: ["Paris", "Rome"] }, celsius: { type: "boolean" } },
  required: ["city", "celsius"],
  additionalProperties: false,
};
const chatTool = { type: "function", function: { name: "get_weather", parameters: weather } };

/** Bodies per endpoint: each line's body exercises one feature whose output shape the SDK types. */
const LINES: Record<string, Record<string, object>> = {
  "/v1/chat/completions": {
    plain: { messages: [{ role: "user", content: "Hello" }], max_tokens: 8 },
    logprobs: { messages: [{ role: "user", content: "Hello" }], max_tokens: 4, logprobs: true, top_logprobs: 2 },
    n: { messages: [{ role: "user", content: "Hello" }], max_tokens: 4, n: 2, temperature: 1, seed: 1 },
    schema: {
      messages: [{ role: "user", content: "Weather as JSON" }],
      max_tokens: 100,
      response_format: { type: "json_schema", json_schema: { name: "weather", schema: weather, strict: true } },
    },
    tools: { messages: [{ role: "user", content: "Weather in Paris?" }], tools: [chatTool], tool_choice: "required", max_tokens: 100 },
    unsupported: { messages: [{ role: "user", content: "x" }], audio: { voice: "alloy", format: "mp3" } },
  },
  "/v1/completions": {
    plain: { prompt: "Once upon a time", max_tokens: 8 },
    logprobs: { prompt: "Once upon a time", max_tokens: 4, logprobs: 2, echo: false },
    n: { prompt: ["One", "Two"], max_tokens: 4, n: 2 },
    // A prompt scored as eval harnesses ask (its first token's log probability null, as OpenAI answers it).
    echo: { prompt: "Once upon", max_tokens: 5, echo: true, logprobs: 2 },
    echo_only: { prompt: ["Once upon", "A time"], max_tokens: 0, echo: true, logprobs: 1 },
  },
  "/v1/embeddings": {
    float: { input: ["hello", "world"] },
    base64: { input: "hello", encoding_format: "base64" },
  },
  "/v1/responses": {
    text: { input: "Hello", max_output_tokens: 8 },
    schema: {
      input: "Weather as JSON",
      max_output_tokens: 100,
      text: { format: { type: "json_schema", name: "weather", schema: weather, strict: true } },
    },
    tools: {
      input: "Weather in Paris?",
      tools: [{ type: "function", name: "get_weather", parameters: weather, strict: true }],
      tool_choice: "required",
    },
    instructions: { instructions: "Answer briefly.", input: [{ role: "user", content: "How are you?" }], max_output_tokens: 5 },
  },
};

const KIND_OF_BODY: Record<string, string> = {
  "chat.completion": "chat.completion",
  text_completion: "text_completion",
  list: "embedding_list",
  response: "response",
};

let svc: TestService;
const emitted: Record<string, unknown[]> = {};
const add = (kind: string, obj: unknown) => {
  emitted[kind] ??= [];
  emitted[kind].push(obj);
};

async function json(method: string, url: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${svc.baseUrl}${url}`, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

async function upload(content: string, filename = "in.jsonl") {
  const form = new FormData();
  form.append("purpose", "batch");
  form.append("file", new Blob([content]), filename);
  const res = await fetch(`${svc.baseUrl}/v1/files`, { method: "POST", body: form });
  const file = await res.json();
  add("file", file);
  return file;
}

async function lines(fileId: string | null): Promise<any[]> {
  if (!fileId) return [];
  const text = await (await fetch(`${svc.baseUrl}/v1/files/${fileId}/content`)).text();
  return text
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

beforeAll(async () => {
  if (!python) return;
  svc = await startTestService({ MODEL_PATH: await ensureGeneratedModel(), CONTEXT_SIZE: "1024" });
  for (const [endpoint, bodies] of Object.entries(LINES)) {
    const jsonl = Object.entries(bodies)
      .map(([id, body]) => JSON.stringify({ custom_id: id, method: "POST", url: endpoint, body: { model: "m", ...body } }))
      .join("\n");
    const file = await upload(`${jsonl}\n`);
    const created = await json("POST", "/v1/batches", {
      input_file_id: file.id,
      endpoint,
      completion_window: "24h",
      metadata: { e: endpoint },
    });
    add("batch", created.body);
    const done = await waitForBatch(svc.baseUrl, created.body.id, 120_000);
    add("batch", done);
    for (const line of [...(await lines(done.output_file_id)), ...(await lines(done.error_file_id))]) {
      const body = line.response?.body;
      if (!body) continue;
      const kind = KIND_OF_BODY[body.object] ?? `unknown:${body.object}`;
      if (line.response.status_code === 200) add(line.custom_id.startsWith("echo") ? `${kind}.echo` : kind, body);
      else add("error", body);
    }
  }
  // A batch that fails validation, one cancelled, the pages, the models, a deleted file and error envelopes.
  const bad = await upload("not json\n");
  add("batch", (await json("POST", "/v1/batches", { input_file_id: bad.id, endpoint: "/v1/completions", completion_window: "24h" })).body);
  const long = await upload(
    `${JSON.stringify({ custom_id: "x", method: "POST", url: "/v1/completions", body: { prompt: "x", max_tokens: 200 } })}\n`,
  );
  const running = await json("POST", "/v1/batches", { input_file_id: long.id, endpoint: "/v1/completions", completion_window: "24h" });
  add("batch", (await json("POST", `/v1/batches/${running.body.id}/cancel`)).body);
  add("batch", await waitForBatch(svc.baseUrl, running.body.id));
  add("batch_page", (await json("GET", "/v1/batches?limit=3")).body);
  add("file_page", (await json("GET", "/v1/files?limit=3")).body);
  const models = (await json("GET", "/v1/models")).body;
  add("model_page", { ...models, has_more: models.has_more ?? false });
  for (const m of models.data) add("model", (await json("GET", `/v1/models/${encodeURIComponent(m.id)}`)).body);
  add("file_deleted", (await json("DELETE", `/v1/files/${bad.id}`)).body);
  for (const [method, url, body] of [
    ["GET", "/v1/batches/batch_000000000000000000000000", undefined],
    ["GET", "/v1/batches?limit=1000", undefined],
    ["POST", "/v1/batches", { endpoint: "/v1/completions" }],
    ["GET", "/v1/files/file-000000000000000000000000", undefined],
    ["GET", "/v1/nowhere", undefined],
  ] as const)
    add("error", (await json(method, url, body)).body);
}, 300_000);
afterAll(() => svc?.close());

describe.skipIf(!python)("every body the service emits, by the official Python SDK's runtime types", () => {
  it("covers every kind it set out to", () => {
    for (const kind of [
      "batch",
      "file",
      "file_deleted",
      "model",
      "chat.completion",
      "text_completion",
      "text_completion.echo",
      "embedding_list",
      "response",
      "error",
    ])
      expect(emitted[kind]?.length ?? 0, kind).toBeGreaterThan(0);
    expect(Object.keys(emitted).filter((k) => k.startsWith("unknown:"))).toEqual([]);
    const chat = emitted["chat.completion"] as any[];
    expect(chat.some((b) => b.choices[0].message.tool_calls?.length)).toBe(true);
    expect(chat.some((b) => b.choices.length === 2)).toBe(true);
    expect((emitted.embedding_list as any[]).some((b) => typeof b.data[0].embedding === "string")).toBe(true);
    expect((emitted.response as any[]).some((b) => b.output.some((o: any) => o.type === "function_call"))).toBe(true);
  });

  it("every body's usage adds up: totals are the sum of their parts, cached tokens a part of the prompt", () => {
    for (const b of [
      ...(emitted["chat.completion"] as any[]),
      ...(emitted.text_completion as any[]),
      ...(emitted["text_completion.echo"] as any[]),
    ]) {
      const u = b.usage;
      expect(u.total_tokens, b.id).toBe(u.prompt_tokens + u.completion_tokens);
      expect(u.prompt_tokens_details?.cached_tokens ?? 0, b.id).toBeLessThanOrEqual(u.prompt_tokens);
    }
    for (const b of emitted.response as any[]) {
      const u = b.usage;
      expect(u.total_tokens, b.id).toBe(u.input_tokens + u.output_tokens);
      expect(u.input_tokens_details.cached_tokens, b.id).toBeLessThanOrEqual(u.input_tokens);
    }
    for (const b of emitted.embedding_list as any[]) expect(b.usage.total_tokens).toBe(b.usage.prompt_tokens);
  });

  it("validates them all", () => {
    let out = "";
    try {
      out = execFileSync(python!, [path.join(repoRoot, "tests/conformance/validate.py")], {
        input: JSON.stringify(emitted),
        encoding: "utf8",
        stdio: ["pipe", "pipe", "pipe"],
      });
    } catch (err) {
      out = String((err as { stdout?: string }).stdout ?? err);
    }
    expect(out.trim().split("\n").filter(Boolean)).toEqual([]);
  });
});
