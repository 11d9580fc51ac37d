// The lane passed where it is used: ExecuteOptions become the borrower the adapter hands the engine with each call,
// and a pool serves a waiter by the lane its acquire was told, not by any context the call happens to run in.
import { describe, expect, it } from "vitest";
import { LlamaBackend } from "../../engine/adapter/openai-backend.js";
import { ResourcePool } from "../../engine/pool/pool.js";
import { BATCH_WORK, type Borrower, type Engine, type EngineInfo } from "../../engine/types.js";
import type { ExecuteOptions } from "../../openai/backend.js";
import { parseRequest } from "../../openai/parse.js";

/** An engine whose calls lend from a real pool of one item, as the engine's own pools do, and record whom for. */
function poolEngine() {
  const pool = new ResourcePool(["sequence"]);
  const lent: Borrower[] = [];
  const answer = { text: "ok", completionTokens: 1, finishReason: "stop" as const, promptTokens: 1, cachedPromptTokens: 0 };
  const borrow = (borrower: Borrower = BATCH_WORK) =>
    pool.use(borrower, undefined, async () => {
      lent.push(borrower);
      return { ...answer, choices: [answer] };
    });
  const engine = {
    info: { modelId: "m", modelPath: "/m.gguf", sequences: 1, threads: 1, build: "prebuilt", ranking: false } as unknown as EngineInfo,
    complete: (_prompt, _params, _signal, borrower) => borrow(borrower),
    chat: (_messages, _params, _signal, borrower) => borrow(borrower),
    embed: async (_inputs, _signal, borrower) => {
      await borrow(borrower);
      return { embeddings: [[1]], promptTokens: 1 };
    },
    rank: async () => ({ scores: [], promptTokens: 0 }),
    countTokens: () => 1,
    detokenize: () => "",
    vocabularySize: 10,
    isEndOfGeneration: () => false,
    scheduling: () => ({}) as ReturnType<Engine["scheduling"]>,
    prepareRun: async () => {},
    close: async () => {},
  } satisfies Engine;
  return { engine, pool, lent };
}

const completion = parseRequest("/v1/completions", { model: "m", prompt: "hi", max_tokens: 1 });

describe("the lane passed to the engine's pools", () => {
  it("hands each engine call the request's lane, its reserve and its onBegin; batch work when none is named", async () => {
    const { engine, lent } = poolEngine();
    const backend = new LlamaBackend(engine);
    const begun: string[] = [];
    const interactive: ExecuteOptions = { lane: "interactive", keepReserve: false, onBegin: () => begun.push("interactive") };
    await backend.execute(completion, undefined, interactive);
    await backend.execute(completion);
    await backend.execute(parseRequest("/v1/embeddings", { model: "m", input: "hi" }), undefined, {
      lane: "batch",
      onBegin: () => begun.push("batch"),
    });
    expect(lent.map((b) => [b.lane, b.keepReserve])).toEqual([
      ["interactive", false],
      ["batch", true],
      ["batch", true],
    ]);
    // Told by the pool as it lent the item: the adapter passed the caller's onBegin down, not a copy of its own.
    expect(begun).toEqual(["interactive", "batch"]);
  });

  it("serves a waiting interactive call first because its acquire was told so, whatever async context it ran in", async () => {
    const { engine, pool } = poolEngine();
    const backend = new LlamaBackend(engine);
    const held = await pool.acquire(BATCH_WORK);
    const order: string[] = [];
    const run = (name: string, options: ExecuteOptions) => backend.execute(completion, undefined, options).then(() => order.push(name));
    const batch = run("batch", {});
    const interactive = run("interactive", { lane: "interactive" });
    pool.release(held);
    await Promise.all([batch, interactive]);
    expect(order).toEqual(["interactive", "batch"]);
  });
});
