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
    // 8 prompts of one token each, 200 tokens each at most: 1,608.
    expectRefused(await attempt(client.completions.create({ model: "m", prompt: EIGHT, max_tokens: 200 })), 8 + 8 * 200);
    expectRefused(await attempt(client.completions.create({ model: "m", prompt: [[1, 2], [3]], max_tokens: 150 })), 3 + 2 * 150);
    expectRefused(await attempt(client.completions.create({ model: "m", prompt: ["a", "b"], max_tokens: 100, n: 2 })), 2 + 4 * 100);
    // The same lists within the limit run, and answer a choice per prompt.
    const ok = await client.completions.create({ model: "m", prompt: EIGHT, max_tokens: 4 });
    expect(ok.choices).toHaveLength(8);
  });

  it("refuses a synchronous chat whose n choices pass the limit", async () => {
    const messages = [{ role: "user" as const, content: "Hi" }];
    expectRefused(await attempt(client.chat.completions.create({ model: "m", messages, max_tokens: 100, n: 3 })), 1 + 4 + 300);
    const ok = await client.chat.completions.create({ model: "m", messages, max_tokens: 4, n: 2 });
    expect(ok.choices).toHaveLength(2);
  });

  it("refuses synchronous embeddings whose inputs together pass the limit", async () => {
    const input = Array.from({ length: 40 }, () => "x".repeat(40));
    expectRefused(await attempt(client.embeddings.create({ model: "m", input })), 400);
    const ok = await client.embeddings.create({ model: "m", input: input.slice(0, 20) });
    expect(ok.data).toHaveLength(20);
  });

  it("fails a batch whose one completions line lists prompts that together pass the limit", async () => {
    const over = await batchOf("/v1/completions", { prompt: EIGHT, max_tokens: 200 });
    expect(over.status).toBe("failed");
    expect(over.errors.data[0]).toMatchObject({ code: "token_limit_exceeded" });
    expect(over.errors.data[0].message).toContain("this batch: 1,608");
    const embeddings = await batchOf("/v1/embeddings", { input: Array.from({ length: 40 }, () => "x".repeat(40)) });
    expect(embeddings.status).toBe("failed");
    expect(embeddings.errors.data[0].code).toBe("token_limit_exceeded");
  });
});
