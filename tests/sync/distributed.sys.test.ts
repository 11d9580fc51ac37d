// Synchronous requests in the distributed mode, on real PostgreSQL and S3: an API server (which runs no model)
// sends each to a worker process that serves its model, found by the URL in the worker's heartbeat row; the
// official clients get the worker's answers, streamed or whole. A worker killed mid-stream ends the stream with
// an error event; one gone before it answers is a 503 with Retry-After; one frozen mid-stream (SIGSTOP) ends the
// stream once its heartbeat lapses: never a hang.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";
import { until } from "../../testkit/batch-client.js";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../testkit/postgres.js";
import { closeCluster, type SharedState, startChild, startNode, startSharedState, type TestNode } from "../helpers/cluster.js";
import { begin, NEVER_ENDS } from "../helpers/long-stream.js";
import type { ServerProcess } from "../helpers/process.js";

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

const LEASE = 4;
const COMMON = { LEASE_SECONDS: String(LEASE), CHECKPOINT_SECONDS: "1", THREADS: "1", SEQUENCES: "4", CONTEXT_SIZE: "4096" };

describe.skipIf(!POSTGRES_BIN)("synchronous requests in the distributed mode", () => {
  let shared: SharedState;
  let api: TestNode;
  let worker: ServerProcess;
  let frozen: ServerProcess | undefined;
  let client: OpenAI;
  const waitForWorker = () =>
    until(
      "a worker to take synchronous requests",
      async () =>
        (await fetch(`${api.baseUrl}/v1/completions`, post({ model: "any", prompt: "Hi", max_tokens: 1 }))).status === 200 || undefined,
      { timeoutMs: 60_000, everyMs: 200 },
    );

  beforeAll(async () => {
    shared = await startSharedState();
    const model = await ensureGeneratedModel();
    api = await startNode(shared, { ...COMMON, ROLE: "api", MODEL_PATH: model });
    worker = await startChild(shared, { ...COMMON, ROLE: "worker", WORKER_POOL: "spot", MODEL_PATH: model });
    client = new OpenAI({ baseURL: `${api.baseUrl}/v1`, apiKey: "unused", maxRetries: 0 });
    // The worker names its URL in its first heartbeat row once it listens.
    await waitForWorker();
  }, 120_000);
  afterAll(async () => {
    for (const p of [worker, frozen]) if (p && p.child.exitCode === null) p.child.kill("SIGKILL");
    await closeCluster(api ? [api] : [], shared);
  });

  const post = (body: object) => ({ method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

  it("answers through the worker, whole and streamed, to the official clients", async () => {
    const chat = await client.chat.completions.create({ model: "any", messages: [{ role: "user", content: "Hello" }], max_tokens: 6 });
    expect(chat).toMatchObject({ object: "chat.completion", service_tier: "default" });
    expect(chat.usage?.completion_tokens).toBeGreaterThan(0);

    const stream = await client.chat.completions.create({
      model: "any",
      messages: [{ role: "user", content: "Hello" }],
      max_tokens: 8,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      usage = chunk.usage ?? usage;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(usage?.completion_tokens).toBeGreaterThan(0);

    const anthropic = new Anthropic({ apiKey: "unused", baseURL: api.baseUrl, maxRetries: 0 });
    const message = await anthropic.messages
      .stream({ model: "m", max_tokens: 6, messages: [{ role: "user", content: "Hello" }] })
      .finalMessage();
    expect(message).toMatchObject({ type: "message", role: "assistant" });

    // The worker keeps their usage where every API server reads it (within its two seconds).
    const began = Math.floor(Date.now() / 1000) - 600;
    await until("the synchronous requests' usage", async () => {
      const page = await (await fetch(`${api.baseUrl}/v1/organization/usage/completions?start_time=${began}&batch=false`)).json();
      const n = page.data?.flatMap((b: any) => b.results).reduce((t: number, r: any) => t + r.num_model_requests, 0);
      return n >= 3 ? n : undefined;
    });

    // The API server's own checks still apply: an unknown model is its 404; a bad body is the worker's 400.
    const bad = await client.chat.completions
      .create({ model: "any", messages: [{ role: "user", content: "x" }], bogus: 1 } as never)
      .catch((e) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect(bad.error).toMatchObject({ param: "bogus" });
  });

  it("ends a stream whose worker is killed with an error event, then answers 503 with Retry-After", async () => {
    const stream = await client.completions.create({
      model: "any",
      prompt: "Once upon a time",
      max_tokens: 4000,
      temperature: 1,
      logit_bias: NEVER_ENDS,
      stream: true,
    });
    const begun = await begin(stream);
    worker.child.kill("SIGKILL");
    await worker.exited;
    const ended = (await begun.rest()) as any;
    expect(ended).toBeInstanceOf(OpenAI.APIError);
    expect(ended.message).toMatch(/stopped before the answer ended/);

    // Its row is still live for a lease: the API server cannot reach it, and says so at once.
    const unreachable = await client.completions.create({ model: "any", prompt: "Hi", max_tokens: 2 }).catch((e) => e);
    expect(unreachable).toBeInstanceOf(OpenAI.InternalServerError);
    expect(unreachable.status).toBe(503);
    expect(unreachable.headers.get("retry-after")).toBe("1");
    // Once the lease lapses no worker serves the model.
    await new Promise((r) => setTimeout(r, (LEASE + 1) * 1000));
    const none = await client.completions.create({ model: "any", prompt: "Hi", max_tokens: 2 }).catch((e) => e);
    expect(none.status).toBe(503);
    expect(none.message).toMatch(/No worker serving/);
  });

  it("ends a stream whose worker freezes once its heartbeat lapses", async () => {
    const model = await ensureGeneratedModel();
    frozen = await startChild(shared, { ...COMMON, ROLE: "worker", WORKER_POOL: "spot", MODEL_PATH: model });
    await waitForWorker();
    const stream = await client.completions.create({
      model: "any",
      prompt: "Once upon a time",
      max_tokens: 4000,
      temperature: 1,
      logit_bias: NEVER_ENDS,
      stream: true,
    });
    const begun = await begin(stream);
    frozen.child.kill("SIGSTOP");
    const stopped = Date.now();
    const ended = (await begun.rest()) as any;
    expect(ended).toBeInstanceOf(OpenAI.APIError);
    expect(ended.message).toMatch(/stopped before the answer ended/);
    // Within a lease and a half of its last heartbeat, and the API server's look every half lease.
    expect(Date.now() - stopped).toBeLessThan(3 * LEASE * 1000);
    frozen.child.kill("SIGKILL");
  });
});
