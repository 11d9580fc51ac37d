// Anthropic's Message Batches API through the real service and the official @anthropic-ai/sdk, on the generated
// model (its template has a tool-call format): Messages params mapped onto chat and honoured (system, blocks,
// stop_sequences, temperature/top_p/top_k, tools and tool_choice, JSON output) or refused per request naming the
// field; results, counts, list, cancel and delete in Anthropic's shapes, keyed by `x-api-key`; every object
// validated by the official Python SDK's pydantic types where it is installed.
import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import Anthropic from "@anthropic-ai/sdk";
import type { MessageBatch, MessageBatchIndividualResponse } from "@anthropic-ai/sdk/resources/messages/batches";
import { Ajv } from "ajv";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";
import { pythonWithAnthropic } from "../../testkit/python.js";
import { repoRoot } from "../../testkit/repo-root.js";
import { openaiClient, startTestService, type TestService } from "../helpers/service.js";

const KEY = "sk-anthropic-test";
const python = pythonWithAnthropic();
if (!python)
  console.warn("the Anthropic pydantic checks are skipped: no Python with the anthropic package (.venv/bin/pip install anthropic)");

let svc: TestService;
let client: Anthropic;
/** Everything the routes emitted, by kind, for the Python SDK's types. */
const emitted: Record<string, unknown[]> = {};
const add = (kind: string, obj: unknown) => {
  emitted[kind] ??= [];
  emitted[kind].push(JSON.parse(JSON.stringify(obj)));
};

beforeAll(async () => {
  svc = await startTestService({
    MODEL_PATH: await ensureGeneratedModel(),
    CONTEXT_SIZE: "1024",
    API_KEYS: KEY,
    MAX_REQUESTS_PER_BATCH: "50",
  });
  client = new Anthropic({ apiKey: KEY, baseURL: svc.baseUrl, maxRetries: 0 });
});
afterAll(async () => svc?.close());

const weather = {
  type: "object" as const,
  properties: { city: { type: "string", enum: ["Paris", "Rome"] }, celsius: { type: "boolean" } },
  required: ["city", "celsius"],
  additionalProperties: false,
};
const tool = { name: "get_weather", description: "The weather in a city", input_schema: weather };
const user = (content: string) => [{ role: "user" as const, content }];
type Params = Anthropic.Messages.MessageCreateParamsNonStreaming;
const params = (p: Partial<Params> & Record<string, unknown>): Params =>
  ({ model: "claude-sonnet-4-5", max_tokens: 16, messages: user("Hello"), ...p }) as Params;

async function ended(id: string): Promise<MessageBatch> {
  for (let i = 0; i < 1200; i++) {
    const b = await client.messages.batches.retrieve(id);
    if (b.processing_status === "ended") return b;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`message batch ${id} did not end`);
}

async function results(id: string): Promise<Map<string, MessageBatchIndividualResponse["result"]>> {
  const out = new Map<string, MessageBatchIndividualResponse["result"]>();
  for await (const line of await client.messages.batches.results(id)) {
    expect(out.has(line.custom_id), `${line.custom_id} twice`).toBe(false);
    out.set(line.custom_id, line.result);
    add("result", line);
  }
  return out;
}

async function run(requests: Record<string, Params>, opts: { endsAtOnce?: boolean } = {}) {
  const created = await client.messages.batches.create({
    requests: Object.entries(requests).map(([custom_id, p]) => ({ custom_id, params: p })),
  });
  add("message_batch", created);
  if (!opts.endsAtOnce) {
    expect(created).toMatchObject({ type: "message_batch", processing_status: "in_progress", ended_at: null, results_url: null });
    expect(created.request_counts).toEqual({ processing: Object.keys(requests).length, succeeded: 0, errored: 0, canceled: 0, expired: 0 });
  }
  const batch = await ended(created.id);
  add("message_batch", batch);
  return { batch, results: await results(batch.id) };
}

const errorOf = (r: MessageBatchIndividualResponse["result"] | undefined) => {
  expect(r?.type).toBe("errored");
  return (r as Anthropic.Messages.MessageBatchErroredResult).error;
};
const messageOf = (r: MessageBatchIndividualResponse["result"] | undefined) => {
  expect(r?.type, JSON.stringify(r)).toBe("succeeded");
  return (r as Anthropic.Messages.MessageBatchSucceededResult).message;
};

describe("Anthropic's Message Batches API", () => {
  it("serves Messages params over the engine and refuses, per request and by name, what it cannot honour", async () => {
    const refused: Record<string, [Params, string]> = {
      image: [
        params({ messages: [{ role: "user", content: [{ type: "image", source: { type: "url", url: "http://127.0.0.1/x.png" } }] }] }),
        "messages[0].content[0].type",
      ],
      thinking: [params({ thinking: { type: "enabled", budget_tokens: 1024 } }), "thinking.type"],
      server_tool: [params({ tools: [{ type: "web_search_20250305", name: "web_search" }] as never }), "tools[0].type"],
      prefill: [params({ messages: [...user("Hi"), { role: "assistant", content: "Well" }] }), "messages[1]"],
      unknown: [params({ top_a: 1 }), "top_a"],
      five_stops: [params({ stop_sequences: ["a", "b", "c", "d", "e"] }), "stop_sequences"],
      stream: [params({ stream: true } as never), "stream"],
      no_schema: [params({ tools: [{ name: "f" }] as never }), "tools[0].input_schema"],
      missing: [{ model: "claude-sonnet-4-5", messages: user("x") } as never, "max_tokens"],
      too_long: [params({ max_tokens: 100_000 }), "max_tokens"],
      bad_temperature: [params({ temperature: 1.5 }), "temperature"],
      empty_stop: [params({ stop_sequences: ["END", ""] }), "stop_sequences"],
      // A request naming no model is its own error; the batch's other requests still run.
      no_model: [{ max_tokens: 4, messages: user("x") } as never, "model"],
      unknown_tool: [params({ tools: [tool], tool_choice: { type: "tool", name: "nope" } }), "tool_choice"],
      result_image: [
        params({
          messages: [
            ...user("Weather?"),
            {
              role: "assistant",
              content: [{ type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris", celsius: true } }],
            },
            { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "image", source: {} }] as never }] },
          ],
          tools: [tool],
        }),
        "messages[2].content[0].content[0].type",
      ],
    };
    const served: Record<string, Params> = {
      plain: params({ system: "Answer briefly.", metadata: { user_id: "u1" }, service_tier: "auto" }),
      blocks: params({
        system: [{ type: "text", text: "Be kind.", cache_control: { type: "ephemeral" } }],
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "Hello" },
              { type: "text", text: "there" },
            ],
          },
        ],
        temperature: 0.7,
        top_p: 0.9,
        top_k: 20,
        stop_sequences: ["\n\n"],
      }),
      tool_any: params({
        max_tokens: 100,
        messages: user("Weather in Paris?"),
        tools: [tool],
        tool_choice: { type: "any", disable_parallel_tool_use: true },
      }),
      tool_named: params({
        max_tokens: 100,
        messages: user("Weather?"),
        tools: [tool],
        tool_choice: { type: "tool", name: "get_weather" },
      }),
      tool_turns: params({
        max_tokens: 30,
        messages: [
          ...user("Weather in Rome?"),
          {
            role: "assistant",
            content: [
              { type: "text", text: "Let me look." },
              { type: "tool_use", id: "toolu_7", name: "get_weather", input: { city: "Rome", celsius: true } },
            ],
          },
          {
            role: "user",
            content: [
              { type: "tool_result", tool_use_id: "toolu_7", content: "21 degrees", is_error: false },
              { type: "text", text: "And so?" },
            ],
          },
        ],
        tools: [tool],
        tool_choice: { type: "none" },
      }),
      json: params({
        max_tokens: 120,
        messages: user("Weather as JSON"),
        output_config: { format: { type: "json_schema", schema: weather } },
      }),
      thinking_off: params({ thinking: { type: "disabled" } }),
    };
    const all = { ...served, ...Object.fromEntries(Object.entries(refused).map(([k, [p]]) => [k, p])) };
    const { batch, results: got } = await run(all);

    const total = Object.keys(all).length;
    expect(batch.request_counts).toEqual({
      processing: 0,
      succeeded: Object.keys(served).length,
      errored: Object.keys(refused).length,
      canceled: 0,
      expired: 0,
    });
    expect(batch.ended_at).not.toBeNull();
    expect(batch.id).toMatch(/^msgbatch_[0-9a-f]+$/);
    expect(batch.results_url).toBe(`${svc.baseUrl}/v1/messages/batches/${batch.id}/results`);
    expect(Date.parse(batch.expires_at) - Date.parse(batch.created_at)).toBe(24 * 3600 * 1000);
    expect(got.size).toBe(total);

    for (const [id, [, field]] of Object.entries(refused)) {
      const e = errorOf(got.get(id));
      expect(e.type).toBe("error");
      expect(e.request_id, id).toMatch(/^req_\w+$/);
      expect(e.error.type, id).toBe("invalid_request_error");
      expect(e.error.message, id).toContain(field);
    }
    const model = (await openaiClient(svc).models.list({ headers: { authorization: `Bearer ${KEY}` } })).data[0].id;
    for (const id of Object.keys(served)) {
      const m = messageOf(got.get(id));
      expect(m).toMatchObject({ type: "message", role: "assistant", model, stop_details: null, container: null });
      expect(m.id).toMatch(/^msg_/);
      expect(m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0)).toBeGreaterThan(0);
      expect(m.usage.output_tokens).toBeLessThanOrEqual(all[id].max_tokens);
      expect(m.usage.service_tier).toBe("batch");
      expect(["end_turn", "max_tokens", "stop_sequence", "tool_use"]).toContain(m.stop_reason);
    }
    // A tool the request must call is called, with input that validates against its schema (grammar-constrained).
    const validate = new Ajv().compile(weather);
    for (const id of ["tool_any", "tool_named"]) {
      const m = messageOf(got.get(id));
      const uses = m.content.filter((b) => b.type === "tool_use");
      if (m.stop_reason === "tool_use") {
        expect(uses).toHaveLength(1);
        expect(uses[0]).toMatchObject({ type: "tool_use", name: "get_weather", caller: { type: "direct" } });
        expect(validate(uses[0].input), JSON.stringify(uses[0].input)).toBe(true);
      } else expect(m.stop_reason).toBe("max_tokens");
    }
    // tool_choice none: the answer is text only.
    expect(messageOf(got.get("tool_turns")).content.every((b) => b.type === "text")).toBe(true);
    const json = messageOf(got.get("json"));
    if (json.stop_reason === "end_turn") {
      const text = json.content.find((b) => b.type === "text");
      expect(validate(JSON.parse((text as Anthropic.Messages.TextBlock).text))).toBe(true);
    }
  }, 180_000);

  it("honours top_k (top_k 1 answers as greedy decoding does) and names the stop sequence that ended an answer", async () => {
    const prompt = user("Tell me a story about the sea.");
    const { results: first } = await run({
      greedy: params({ messages: prompt, max_tokens: 24, temperature: 0 }),
      top1: params({ messages: prompt, max_tokens: 24, temperature: 1, top_k: 1 }),
    });
    const text = (id: string) => (messageOf(first.get(id)).content[0] as Anthropic.Messages.TextBlock).text;
    expect(text("top1")).toBe(text("greedy"));
    // A piece of the greedy answer, used as a stop sequence, ends the same answer there.
    const answer = text("greedy");
    const stop = answer.slice(4, 8);
    expect(stop.length, `answer too short: ${JSON.stringify(answer)}`).toBe(4);
    const { results: second } = await run({
      stopped: params({ messages: prompt, max_tokens: 24, temperature: 0, stop_sequences: [stop] }),
    });
    const m = messageOf(second.get("stopped"));
    expect(m.stop_reason).toBe("stop_sequence");
    expect(m.stop_sequence).toBe(stop);
    expect((m.content[0] as Anthropic.Messages.TextBlock).text).toBe(answer.slice(0, answer.indexOf(stop)));
  }, 120_000);

  it("lists only message batches, newest first, paging with after_id and before_id; an OpenAI batch of /v1/messages lines is one too", async () => {
    const a = await client.messages.batches.create({ requests: [{ custom_id: "a", params: params({ max_tokens: 2 }) }] });
    const openai = openaiClient(svc);
    const chat = await openai.batches.create(
      {
        input_file_id: (await uploadLine("/v1/chat/completions", { messages: [{ role: "user", content: "x" }], max_tokens: 2 })).id,
        endpoint: "/v1/chat/completions",
        completion_window: "24h",
      },
      { headers: { authorization: `Bearer ${KEY}` } },
    );
    const viaOpenAI = await openai.batches.create(
      {
        input_file_id: (await uploadLine("/v1/messages", params({ max_tokens: 2 }))).id,
        endpoint: "/v1/messages" as never,
        completion_window: "24h",
      },
      { headers: { authorization: `Bearer ${KEY}` } },
    );
    const b = await client.messages.batches.create({ requests: [{ custom_id: "b", params: params({ max_tokens: 2 }) }] });
    // One batch, named msgbatch_… on Anthropic's routes and batch_… on OpenAI's: either route takes either name.
    const viaOpenAIMsg = viaOpenAI.id.replace(/^batch_/, "msgbatch_");
    expect((await client.messages.batches.retrieve(viaOpenAI.id)).id).toBe(viaOpenAIMsg);
    expect((await openai.batches.retrieve(b.id, { headers: { authorization: `Bearer ${KEY}` } })).id).toBe(
      b.id.replace(/^msgbatch_/, "batch_"),
    );
    const page = await client.messages.batches.list({ limit: 2 });
    add("message_batch_page", { data: page.data, has_more: page.has_more, first_id: page.first_id, last_id: page.last_id });
    expect(page.data.map((x) => x.id)).toEqual([b.id, viaOpenAIMsg]);
    expect(page.has_more).toBe(true);
    const ids: string[] = [];
    for await (const x of client.messages.batches.list({ limit: 1 })) ids.push(x.id);
    expect(ids.slice(0, 3)).toEqual([b.id, viaOpenAIMsg, a.id]);
    expect(ids).not.toContain(chat.id);
    expect(new Set(ids).size).toBe(ids.length);
    await expect(client.messages.batches.retrieve(chat.id)).rejects.toBeInstanceOf(Anthropic.NotFoundError);
    // The OpenAI batch's lines answer with Anthropic's message, and the Anthropic view shows its results.
    const done = await ended(viaOpenAI.id);
    expect(done.request_counts.succeeded).toBe(1);
    expect(done.id).toBe(viaOpenAIMsg);
    expect(messageOf((await results(viaOpenAI.id)).get("x")).type).toBe("message");
    // Backwards from a: the page just newer, newest first, and the SDK's reverse paging over the rest.
    const before = await client.messages.batches.list({ before_id: a.id, limit: 1 });
    expect(before.data.map((x) => x.id)).toEqual([viaOpenAIMsg]);
    expect([before.has_more, before.first_id, before.last_id]).toEqual([true, viaOpenAIMsg, viaOpenAIMsg]);
    expect((await client.messages.batches.list({ before_id: a.id })).data.map((x) => x.id)).toEqual([b.id, viaOpenAIMsg]);
    const back: string[] = [];
    for await (const x of client.messages.batches.list({ before_id: a.id, limit: 1 })) back.push(x.id);
    expect(back).toEqual([viaOpenAIMsg, b.id]);
    expect((await client.messages.batches.list({ before_id: b.id })).data).toEqual([]);
    const both = await client.messages.batches.list({ before_id: b.id, after_id: a.id }).catch((e) => e);
    expect(both).toBeInstanceOf(Anthropic.BadRequestError);
    expect(both.error.error.message).toContain("after_id or before_id");
    add("error", both.error);
    await expect(client.messages.batches.list({ before_id: chat.id })).rejects.toBeInstanceOf(Anthropic.NotFoundError);
  }, 120_000);

  it("cancels (what did not run is `canceled`), refuses to delete a running batch, deletes an ended one with its results", async () => {
    const n = 40;
    const created = await client.messages.batches.create({
      requests: Array.from({ length: n }, (_, i) => ({
        custom_id: `c${i}`,
        params: params({ max_tokens: 64, messages: user(`Story ${i}`) }),
      })),
    });
    const early = await client.messages.batches.delete(created.id).catch((e) => e);
    expect(early).toBeInstanceOf(Anthropic.BadRequestError);
    expect(early.error).toMatchObject({ type: "error", error: { type: "invalid_request_error" } });
    const cancelling = await client.messages.batches.cancel(created.id);
    add("message_batch", cancelling);
    expect(["canceling", "ended"]).toContain(cancelling.processing_status);
    expect(cancelling.cancel_initiated_at).not.toBeNull();
    const batch = await ended(created.id);
    add("message_batch", batch);
    const c = batch.request_counts;
    expect(c.processing).toBe(0);
    expect(c.succeeded + c.errored + c.canceled + c.expired).toBe(n);
    expect(c.canceled).toBeGreaterThan(0);
    expect(c.errored).toBe(0);
    const got = await results(created.id);
    expect(got.size).toBe(n);
    expect([...got.values()].filter((r) => r.type === "canceled")).toHaveLength(c.canceled);
    expect([...got.values()].filter((r) => r.type === "succeeded")).toHaveLength(c.succeeded);

    const openaiView = await openaiClient(svc).batches.retrieve(created.id, { headers: { authorization: `Bearer ${KEY}` } });
    const deleted = await client.messages.batches.delete(created.id);
    add("deleted", deleted);
    expect(deleted).toEqual({ id: created.id, type: "message_batch_deleted" });
    await expect(client.messages.batches.retrieve(created.id)).rejects.toBeInstanceOf(Anthropic.NotFoundError);
    const headers = { authorization: `Bearer ${KEY}` };
    expect((await fetch(`${svc.baseUrl}/v1/batches/${created.id}`, { headers })).status).toBe(404);
    expect((await fetch(`${svc.baseUrl}/v1/batches/${created.id.replace(/^msgbatch_/, "batch_")}`, { headers })).status).toBe(404);
    // Its results and the file its requests were kept in (which the client never made) went with it.
    for (const f of [openaiView.output_file_id, openaiView.error_file_id, openaiView.input_file_id].filter(Boolean))
      expect((await fetch(`${svc.baseUrl}/v1/files/${f}`, { headers })).status).toBe(404);
  }, 120_000);

  it("names the results_url the client reached, behind a proxy that forwards the scheme and host", async () => {
    const created = await client.messages.batches.create({ requests: [{ custom_id: "p", params: params({ max_tokens: 2 }) }] });
    await ended(created.id);
    const res = await fetch(`${svc.baseUrl}/v1/messages/batches/${created.id}`, {
      headers: { "x-api-key": KEY, "x-forwarded-proto": "https", "x-forwarded-host": "batch.example.com" },
    });
    expect(((await res.json()) as MessageBatch).results_url).toBe(`https://batch.example.com/v1/messages/batches/${created.id}/results`);
  }, 60_000);

  it("serves Anthropic's Models API to an Anthropic client on the same paths (OpenAI's shapes to others)", async () => {
    const served = svc.service.backend.info.model;
    const page = await client.models.list();
    add("model_page", { data: page.data, has_more: page.has_more, first_id: page.first_id, last_id: page.last_id });
    expect(page.data.map((m) => [m.type, m.id, m.display_name])).toEqual([["model", served, served]]);
    expect([page.has_more, page.first_id, page.last_id]).toEqual([false, served, served]);
    // One model answers every name, so any name finds it, as a batch's params.model would.
    for (const name of [served, "claude-sonnet-4-5"]) {
      const m = await client.models.retrieve(name);
      add("model", m);
      expect(m.id).toBe(served);
    }
    expect((await client.models.list({ after_id: served })).data).toEqual([]);
    expect((await client.models.list({ before_id: served })).data).toEqual([]);
    const both = await client.models.list({ after_id: served, before_id: served }).catch((e) => e);
    expect(both).toBeInstanceOf(Anthropic.BadRequestError);
    expect(both.error.error.message).toContain("after_id or before_id");
    const bad = await client.models.list({ after_id: "nope" }).catch((e) => e);
    expect(bad).toBeInstanceOf(Anthropic.BadRequestError);
    add("error", bad.error);
    const openai = await openaiClient(svc).models.list({ headers: { authorization: `Bearer ${KEY}` } });
    expect(openai.data[0]).toMatchObject({ id: served, object: "model" });
  });

  it("a batch over the request limit ends with every request errored, each with its reason", async () => {
    const { batch, results: got } = await run(
      Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`r${i}`, params({ max_tokens: 2 })])),
      { endsAtOnce: true },
    );
    expect(batch.request_counts).toMatchObject({ processing: 0, succeeded: 0, errored: 51 });
    expect(got.size).toBe(51);
    for (const r of got.values()) expect(errorOf(r).error.message).toMatch(/50/);
  }, 60_000);

  it("answers errors in Anthropic's envelope: keys (x-api-key), bodies, ids, routes, results not ready", async () => {
    const envelope = async (res: Response, status: number, type: string) => {
      expect(res.status).toBe(status);
      const body = await res.json();
      add("error", body);
      expect(body).toMatchObject({ type: "error", error: { type } });
      expect(typeof body.error.message).toBe("string");
      return body.error.message as string;
    };
    const wrong = new Anthropic({ apiKey: "nope", baseURL: svc.baseUrl, maxRetries: 0 });
    const denied = await wrong.messages.batches.list().catch((e) => e);
    expect(denied).toBeInstanceOf(Anthropic.AuthenticationError);
    expect(denied.error).toMatchObject({ type: "error", error: { type: "authentication_error" } });
    const post = (body: string, headers: Record<string, string> = {}) =>
      fetch(`${svc.baseUrl}/v1/messages/batches`, {
        method: "POST",
        headers: { "x-api-key": KEY, "content-type": "application/json", ...headers },
        body,
      });
    expect(await envelope(await post(JSON.stringify({ requests: [] })), 400, "invalid_request_error")).toContain("requests");
    expect(await envelope(await post("{not json"), 400, "invalid_request_error")).toMatch(/JSON/);
    const twice = JSON.stringify({
      requests: [
        { custom_id: "x", params: {} },
        { custom_id: "x", params: {} },
      ],
    });
    expect(await envelope(await post(twice), 400, "invalid_request_error")).toContain("requests[1].custom_id");
    const badId = JSON.stringify({ requests: [{ custom_id: "has space", params: {} }] });
    expect(await envelope(await post(badId), 400, "invalid_request_error")).toContain("requests[0].custom_id");
    expect(
      await envelope(await post(JSON.stringify({ requests: [{ custom_id: "x", params: {} }], extra: 1 })), 400, "invalid_request_error"),
    ).toContain("extra");
    const get = (p: string) => fetch(`${svc.baseUrl}${p}`, { headers: { "x-api-key": KEY } });
    await envelope(await get("/v1/messages/batches/batch_doesnotexist"), 404, "not_found_error");
    await envelope(await get("/v1/messages/batches/not-an-id"), 404, "not_found_error");
    await envelope(await get("/v1/messages/batches/msgbatch_doesnotexist"), 404, "not_found_error");
    // Requests may name different models (message-batches-models.int.test.ts runs them on two).
    const mixed = JSON.stringify({
      requests: [
        { custom_id: "x", params: { model: "a", max_tokens: 1, messages: [{ role: "user", content: "x" }] } },
        { custom_id: "y", params: { model: "b", max_tokens: 1, messages: [{ role: "user", content: "y" }] } },
      ],
    });
    expect((await post(mixed)).status).toBe(200);
    await envelope(await get("/v1/messages/nothing/here"), 404, "not_found_error");
    await envelope(await get("/v1/messages/batches?limit=0"), 400, "invalid_request_error");
    const slow = await client.messages.batches.create({
      requests: Array.from({ length: 20 }, (_, i) => ({ custom_id: `s${i}`, params: params({ max_tokens: 64 }) })),
    });
    expect(await envelope(await get(`/v1/messages/batches/${slow.id}/results`), 400, "invalid_request_error")).toContain("not ended");
    await client.messages.batches.cancel(slow.id);
    await ended(slow.id);
  }, 60_000);

  it.skipIf(!python)(
    "every object it emitted passes the Python SDK's pydantic types",
    async () => {
      for (const kind of ["message_batch", "result", "deleted", "error", "message_batch_page", "model", "model_page"])
        expect(emitted[kind]?.length, kind).toBeGreaterThan(0);
      const script = path.join(repoRoot, "tests/conformance/validate_anthropic.py");
      const child = promisify(execFile)(python!, [script], { maxBuffer: 16 * 1024 * 1024 });
      child.child.stdin!.end(JSON.stringify(emitted));
      const { stderr } = await child.catch((e) => {
        throw new Error(`${e.stdout}${e.stderr}`);
      });
      expect(stderr).toMatch(/checked \d+ objects, 0 failed/);
    },
    60_000,
  );
});

async function uploadLine(url: string, body: object) {
  const form = new FormData();
  form.append("purpose", "batch");
  form.append("file", new Blob([`${JSON.stringify({ custom_id: "x", method: "POST", url, body })}\n`]), "line.jsonl");
  const res = await fetch(`${svc.baseUrl}/v1/files`, { method: "POST", body: form, headers: { authorization: `Bearer ${KEY}` } });
  return (await res.json()) as { id: string };
}
