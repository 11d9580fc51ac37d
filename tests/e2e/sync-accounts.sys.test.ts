// Synchronous requests are counted as batch lines are, through the real server process with a keys file and a
// priced model: usage (`batch: false`, by tier) and costs (the interactive lane at the full price, flex at the batch
// price) in the organization APIs, kept across a restart; a key's enqueued-token limit refusing a request that
// would pass it; and SIGTERM letting a stream run through the drain, then ending it with an error event.
import { writeFileSync } from "node:fs";
import path from "node:path";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";
import { until } from "../../testkit/batch-client.js";
import { getJson, writeKeysFile } from "../helpers/keys.js";
import { begin, NEVER_ENDS } from "../helpers/long-stream.js";
import type { ServerProcess } from "../helpers/process.js";
import { serverTestbed } from "../helpers/server-testbed.js";

const bed = serverTestbed("sync-accounts", { SEQUENCES: "2", CONTEXT_SIZE: "1024", SHUTDOWN_DRAIN_SECONDS: "1" });
const { file: keysFile, auth } = writeKeysFile(bed.dir, [
  { id: "ops", admin: true },
  { id: "team-a", limits: { "*": 600 } },
  { id: "team-b" },
]);
const PRICE = { input: 1, output: 2, discount: 0.5 };
const began = Math.floor(Date.now() / 1000) - 5;

async function start(env: Record<string, string> = {}): Promise<ServerProcess> {
  const modelsFile = path.join(bed.dir, "models.yaml");
  // Cached input at the input rate: the bill below counts tokens, whatever the engine's prefix reuse read.
  const price = `{ input_per_million: ${PRICE.input}, cached_input_per_million: ${PRICE.input}, output_per_million: ${PRICE.output}, batch_discount: ${PRICE.discount} }`;
  writeFileSync(modelsFile, `models:\n  - { name: chat, local: { path: "${await ensureGeneratedModel()}" }, price: ${price} }\n`);
  return bed.start({ KEYS_FILE: keysFile, MODELS_FILE: modelsFile, MODEL_PATH: "", ...env });
}

const clientOf = (s: ServerProcess, key: string) =>
  new OpenAI({ baseURL: `${s.baseUrl}/v1`, apiKey: auth[key].authorization.slice("Bearer ".length), maxRetries: 0 });
const user = (content: string) => [{ role: "user" as const, content }];

/** Runs `test` on a server; one the test left running is killed, so the next can take the BATCH_DIR. */
async function withServer(test: (s: ServerProcess) => Promise<void>, env?: Record<string, string>): Promise<void> {
  const s = await start(env);
  try {
    await test(s);
  } finally {
    if (s.child.exitCode === null && s.child.signalCode === null) {
      s.child.kill("SIGKILL");
      await s.exited;
    }
  }
}

async function syncUsage(s: ServerProcess): Promise<any[]> {
  const q = `start_time=${began}&bucket_width=1d&batch=false&group_by=batch,service_tier,api_key_id`;
  const page = await getJson(s.baseUrl, `/v1/organization/usage/completions?${q}`, auth.ops);
  expect(page.status).toBe(200);
  return page.body.data.flatMap((b: any) => b.results);
}

describe("synchronous requests' accounts", () => {
  it("counts them in the usage and costs APIs by tier, at the full price or flex's batch price, kept across a restart", async () => {
    let answers: OpenAI.ChatCompletion[] = [];
    const sum = (tier: string) =>
      answers
        .filter((a) => a.service_tier === tier)
        .reduce((n, a) => ({ input: n.input + a.usage!.prompt_tokens, output: n.output + a.usage!.completion_tokens }), {
          input: 0,
          output: 0,
        });
    const expected = (results: any[]) => {
      for (const tier of ["default", "flex"]) {
        const r = results.find((x) => x.service_tier === tier);
        expect(r).toMatchObject({ batch: false, api_key_id: "team-b", input_tokens: sum(tier).input, output_tokens: sum(tier).output });
      }
      expect(results.find((x) => x.service_tier === "default").num_model_requests).toBe(2);
    };
    await withServer(async (s) => {
      const b = clientOf(s, "team-b");
      answers = [
        await b.chat.completions.create({ model: "chat", messages: user("Hello"), max_tokens: 8 }),
        await b.chat.completions.create({ model: "chat", messages: user("Hello there"), max_tokens: 6 }),
        await b.chat.completions.create({ model: "chat", messages: user("Hi"), max_tokens: 5, service_tier: "flex" }),
      ];
      expected(
        await until("both tiers' usage", async () => {
          const r = await syncUsage(s);
          return r.length === 2 && r.reduce((n, x) => n + x.num_model_requests, 0) === 3 ? r : undefined;
        }),
      );
      const costs = await getJson(s.baseUrl, `/v1/organization/costs?start_time=${began}&group_by=api_key_id`, auth.ops);
      const bill = (t: { input: number; output: number }) => (t.input * PRICE.input + t.output * PRICE.output) / 1e6;
      const value = costs.body.data.flatMap((x: any) => x.results).find((r: any) => r.api_key_id === "team-b").amount.value;
      expect(value).toBeCloseTo(bill(sum("default")) + bill(sum("flex")) * (1 - PRICE.discount), 6);
      // None of it shows as batch usage.
      const batches = await getJson(s.baseUrl, `/v1/organization/usage/completions?start_time=${began}&batch=true`, auth.ops);
      expect(batches.body.data.flatMap((x: any) => x.results)).toEqual([]);

      s.child.kill("SIGTERM");
      expect(await s.exited).toBe(0);
    });
    await withServer(async (s) => expected(await syncUsage(s)));
  });

  it("refuses a request that would take its key past its enqueued-token limit, as a 429 naming it", () =>
    withServer(async (s) => {
      const a = clientOf(s, "team-a");
      const refused = await a.chat.completions.create({ model: "chat", messages: user("Hello"), max_tokens: 700 }).catch((e) => e);
      expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
      expect(refused.code).toBe("token_limit_exceeded");
      expect(refused.message).toMatch(/Limit: 600/);
      expect(refused.headers.get("retry-after")).toBe("5");
      const ok = await a.chat.completions.create({ model: "chat", messages: user("Hello"), max_tokens: 8 });
      expect(ok.choices[0].message.role).toBe("assistant");
    }));

  it("lets a stream run through SIGTERM's drain, then ends it with an error event, and exits 0", () =>
    withServer(
      async (s) => {
        const b = clientOf(s, "team-b");
        const stream = await b.chat.completions.create({
          model: "chat",
          messages: user("Tell a long story"),
          // About 1,000 tokens a second here: generating for seconds past the drain's one.
          max_tokens: 8000,
          temperature: 1,
          logit_bias: NEVER_ENDS,
          stream: true,
        });
        const begun = await begin(stream);
        s.child.kill("SIGTERM");
        // During the drain the service still answers (the flex lane has room beside the stream).
        const during = await b.chat.completions.create({ model: "chat", messages: user("Hi"), max_tokens: 4, service_tier: "flex" });
        expect(during.service_tier).toBe("flex");
        const ended = (await begun.rest()) as any;
        expect(ended).toBeInstanceOf(OpenAI.APIError);
        expect(ended.message).toMatch(/shutting down and stopped this request before it ended/);
        expect(begun.pieces).toBeGreaterThan(3);
        expect(await s.exited).toBe(0);
      },
      { CONTEXT_SIZE: "8192" },
    ));
});
