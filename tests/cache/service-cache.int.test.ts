// The result cache in the service as a user meets it: a batch's repeated greedy lines answered once (each line its
// own custom_id, id and created, one stored answer), a second batch answered from the store, metadata.cache "off"
// storing nothing, a value other than on or off refused naming it, RESULT_CACHE=off opening no store.
import { existsSync } from "node:fs";
import path from "node:path";
import { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LmdbResultCache } from "../../cache/lmdb-cache.js";
import { openaiClient, startTestService, type TestService, waitForClientBatch } from "../helpers/service.js";

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
}, 120_000);
afterAll(() => svc?.close());

const line = (id: string, content: string) =>
  JSON.stringify({
    custom_id: id,
    method: "POST",
    url: "/v1/chat/completions",
    body: { model: "m", messages: [{ role: "user", content }], temperature: 0, max_tokens: 6 },
  });

async function run(lines: string[], metadata?: Record<string, string>) {
  const client = openaiClient(svc);
  const file = await client.files.create({ file: await toFile(Buffer.from(lines.join("\n")), "in.jsonl"), purpose: "batch" });
  const created = await client.batches.create({
    input_file_id: file.id,
    endpoint: "/v1/chat/completions",
    completion_window: "24h",
    metadata,
  });
  const done = await waitForClientBatch(client, created.id, 120_000);
  expect(done.status).toBe("completed");
  const text = await (await client.files.content(done.output_file_id!)).text();
  return text
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { custom_id: string; response: { body: any } });
}

/** The entries the service's store holds, read through a second handle on its folder. */
async function storedEntries(): Promise<number> {
  const peek = new LmdbResultCache(path.join(svc.batchDir, "cache", "answers"), { maxBytes: 1 << 30, ttlSeconds: 0 });
  try {
    return (await peek.stats()).entries;
  } finally {
    await peek.close();
  }
}

describe("the result cache in the service", () => {
  it("answers a batch's repeats once each with its own ids, then a later batch from the store", async () => {
    const out = await run([line("a", "Tell me"), line("b", "Tell me"), line("c", "Tell me"), line("d", "Other")]);
    expect(out.map((l) => l.custom_id).sort()).toEqual(["a", "b", "c", "d"]);
    const bodies = Object.fromEntries(out.map((l) => [l.custom_id, l.response.body]));
    const content = (id: string) => bodies[id].choices[0].message.content;
    expect(content("b")).toBe(content("a"));
    expect(content("c")).toBe(content("a"));
    expect(new Set(["a", "b", "c"].map((id) => bodies[id].id)).size).toBe(3);
    expect(await storedEntries()).toBe(2);

    const again = await run([line("x", "Tell me"), line("y", "Other")]);
    expect(again.find((l) => l.custom_id === "x")!.response.body.choices[0].message.content).toBe(content("a"));
    expect(await storedEntries()).toBe(2);
  }, 180_000);

  it("stores nothing for a batch with metadata.cache off, and refuses another value naming it", async () => {
    await run([line("a", "Fresh one"), line("b", "Fresh one")], { cache: "off" });
    expect(await storedEntries()).toBe(2);
    const client = openaiClient(svc);
    const file = await client.files.create({ file: await toFile(Buffer.from(line("a", "x")), "in.jsonl"), purpose: "batch" });
    const refused = await client.batches
      .create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h", metadata: { cache: "of" } })
      .catch((e) => e);
    expect(refused.status).toBe(400);
    expect(refused.error).toMatchObject({ code: "invalid_metadata", param: "metadata.cache" });
  }, 180_000);

  it("answers a synchronous repeat from the store, unless its request says no-cache (Cache-Control, or HTTP/1.0's Pragma)", async () => {
    const ask = async (headers: Record<string, string> = {}) => {
      const res = await fetch(`${svc.baseUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "Once more" }], temperature: 0, max_tokens: 6 }),
      });
      expect(res.status).toBe(200);
      const usage = ((await res.json()) as any).usage;
      return usage.prompt_tokens_details.cached_tokens === usage.prompt_tokens ? "cache" : "computed";
    };
    expect(await ask()).toBe("computed");
    expect(await ask()).toBe("cache");
    expect(await ask({ "cache-control": "no-cache" })).toBe("computed");
    expect(await ask({ pragma: "no-cache" })).toBe("computed");
  }, 120_000);

  it("opens no store with RESULT_CACHE=off", async () => {
    const off = await startTestService({ RESULT_CACHE: "off" });
    try {
      expect(existsSync(path.join(off.batchDir, "cache", "answers"))).toBe(false);
    } finally {
      await off.close();
    }
  }, 120_000);
});
