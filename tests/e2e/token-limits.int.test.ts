// A key's enqueued-token limit counts what a request may really generate, through the real HTTP surface of an
// in-process service with a keys file: every prompt of a completions list (strings, token ids, lists of token-id
// arrays) times n times its max_tokens, chat's n, and every input of an embeddings list, for synchronous requests
// and batch lines alike; what fits the limit still runs.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBatch } from "../../testkit/batch-client.js";
import { uploadJsonl } from "../helpers/http-batches.js";
import { writeKeysFile } from "../helpers/keys.js";
import { startTestService, type TestService } from "../helpers/service.js";

const LIMIT = 300;
const dir = mkdtempSync(path.join(os.tmpdir(), "obi-token-limits-"));
const { file, auth } = writeKeysFile(dir, [{ id: "team", limits: { "*": LIMIT } }]);
const EIGHT = ["a", "b", "c", "d", "e", "f", "g", "h"];

let svc: TestService;
let client: OpenAI;
beforeAll(async () => {
  svc = await startTestService({ KEYS_FILE: file, CONTEXT_SIZE: "1024" });
  client = new OpenAI({ baseURL: `${svc.baseUrl}/v1`, apiKey: auth.team.authorization.slice("Bearer ".length), maxRetries: 0 });
}, 120_000);
afterAll(async () => {
  await svc?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A synchronous request's refusal, or its answer. */
const attempt = <T>(p: Promise<T>): Promise<T | InstanceType<typeof OpenAI.RateLimitError>> => p.catch((e) => e);

function expectRefused(r: unknown, requested: number) {
  expect(r).toBeInstanceOf(OpenAI.RateLimitError);
  const e = r as InstanceType<typeof OpenAI.RateLimitError>;
  expect(e.code).toBe("token_limit_exceeded");
  expect(e.message).toContain(`Limit: ${LIMIT}`);
  expect(e.message).toContain(`this request: ${requested}`);
}

/** What the model's tokenizer makes of a completion's prompts, as its usage says: what the limits count them as. */
async function promptTokens(prompt: string | string[]): Promise<number> {
  const r = await client.completions.create({ model: "m", prompt, max_tokens: 1 });
  return r.usage!.prompt_tokens;
}

/** Embeddings inputs of 40 characters: as many as fit the limit, and their tokens each. */
async function inputsFitting(): Promise<{ text: string; each: number; fit: number }> {
  const text = "x".repeat(40);
  const each = await promptTokens(text);
  return { text, each, fit: Math.floor(LIMIT / each) };
}

/** A one-line batch of `url` with `body`, as the key: the created batch. */
async function batchOf(url: string, body: object): Promise<any> {
  const line = JSON.stringify({ custom_id: "only", method: "POST", url, body: { model: "m", ...body } });
  const up = await uploadJsonl(svc.baseUrl, `${line}\n`, auth.team);
  const created = await createBatch(svc.baseUrl, up.id, { endpoint: url, headers: auth.team });
  expect(created.status).toBe(200);
  return created.body;
}

describe("enqueued-token limits count every prompt, input and choice", () => {
  it("refuses a synchronous completion whose prompt list, times max_tokens, passes the limit", async () => {
    // 8 prompts of a letter each (a token or two by the model's tokenizer), 200 tokens each at most.
    const eight = await promptTokens(EIGHT);
    expectRefused(await attempt(client.completions.create({ model: "m", prompt: EIGHT, max_tokens: 200 })), eight + 8 * 200);
    expectRefused(await attempt(client.completions.create({ model: "m", prompt: [[1, 2], [3]], max_tokens: 150 })), 3 + 2 * 150);
    const two = await promptTokens(["a", "b"]);
    expectRefused(await attempt(client.completions.create({ model: "m", prompt: ["a", "b"], max_tokens: 100, n: 2 })), two + 4 * 100);
    // The same lists within the limit run, and answer a choice per prompt.
    const ok = await client.completions.create({ model: "m", prompt: EIGHT, max_tokens: 4 });
    expect(ok.choices).toHaveLength(8);
  });

  it("refuses a synchronous chat whose n choices pass the limit", async () => {
    const messages = [{ role: "user" as const, content: "Hi" }];
    // A message counts its text's tokens and the template's 4 around it.
    const hi = await promptTokens("Hi");
    expectRefused(await attempt(client.chat.completions.create({ model: "m", messages, max_tokens: 100, n: 3 })), hi + 4 + 300);
    const ok = await client.chat.completions.create({ model: "m", messages, max_tokens: 4, n: 2 });
    expect(ok.choices).toHaveLength(2);
  });

  it("refuses synchronous embeddings whose inputs together pass the limit", async () => {
    const { text, each, fit } = await inputsFitting();
    const input = Array.from({ length: fit + 1 }, () => text);
    expectRefused(await attempt(client.embeddings.create({ model: "m", input })), (fit + 1) * each);
    const ok = await client.embeddings.create({ model: "m", input: input.slice(0, fit) });
    expect(ok.data).toHaveLength(fit);
  });

  it("fails a batch whose one completions line lists prompts that together pass the limit", async () => {
    const over = await batchOf("/v1/completions", { prompt: EIGHT, max_tokens: 200 });
    expect(over.status).toBe("failed");
    expect(over.errors.data[0]).toMatchObject({ code: "token_limit_exceeded" });
    const eight = await promptTokens(EIGHT);
    expect(over.errors.data[0].message).toContain(`this batch: ${(eight + 8 * 200).toLocaleString("en-US")}`);
    const { text, fit } = await inputsFitting();
    const embeddings = await batchOf("/v1/embeddings", { input: Array.from({ length: fit + 1 }, () => text) });
    expect(embeddings.status).toBe("failed");
    expect(embeddings.errors.data[0].code).toBe("token_limit_exceeded");
  });
});
