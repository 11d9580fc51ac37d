// A backend served over chat (Responses and Messages lines through its chat) still tells what the wrapped backend
// tells beside its answers: its preemptions (/metrics), its tokenizer (the enqueued-token limits), its flow
// figures, its line order and its run's preparation.
import { describe, expect, it } from "vitest";
import { MESSAGES_DIALECT } from "../../anthropic/dialect.js";
import type { BackendStats, InferenceBackend, RunShape } from "../../openai/backend.js";
import { overChat, RESPONSES_DIALECT } from "../../openai/over-chat.js";

const DIALECTS = [RESPONSES_DIALECT, MESSAGES_DIALECT];

const stats: BackendStats = {
  inFlight: 1,
  limit: 4,
  waiting: 0,
  latencyMs: 20,
  requests: 9,
  retries: 0,
  errors: {},
  decreases: {},
};

function backend(): InferenceBackend & { prepared: RunShape[] } {
  const prepared: RunShape[] = [];
  return {
    prepared,
    info: {
      model: "m",
      kind: "local",
      endpoints: ["/v1/chat/completions", "/v1/completions"],
      concurrency: 2,
      generatedModel: false,
      settings: {},
      summary: "",
    },
    lineOrder: async () => ({ order: "interleave", lanes: 3 }),
    prepareRun: async (shape) => {
      prepared.push(shape);
    },
    countTokens: (text) => text.split(" ").length,
    stats: () => stats,
    preemptions: () => 7,
    check: () => {},
    execute: () => Promise.reject(new Error("not run here")),
    close: async () => {},
  };
}

describe("overChat", () => {
  it("serves Responses and Messages, and passes on everything the wrapped backend tells", async () => {
    const inner = backend();
    const served = overChat(inner, DIALECTS);
    expect(served.info.endpoints).toEqual(["/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"]);
    expect(served.preemptions?.()).toBe(7);
    expect(served.countTokens?.("one two three")).toBe(3);
    expect(served.stats?.()).toBe(stats);
    expect(await served.lineOrder?.()).toEqual({ order: "interleave", lanes: 3 });
    await served.prepareRun?.({ lines: 10, familyLines: 4 });
    expect(inner.prepared).toEqual([{ lines: 10, familyLines: 4 }]);
  });

  it("serves only the dialects it is given, and none over a backend without chat", () => {
    expect(overChat(backend(), [RESPONSES_DIALECT]).info.endpoints).toEqual(["/v1/chat/completions", "/v1/completions", "/v1/responses"]);
    const inner = backend();
    expect(overChat(inner, [])).toBe(inner);
    const noChat = { ...backend(), info: { ...backend().info, endpoints: ["/v1/embeddings" as const] } };
    expect(overChat(noChat, DIALECTS)).toBe(noChat);
  });

  it("has none of them where the wrapped backend has none", () => {
    const { lineOrder: _l, prepareRun: _p, countTokens: _c, stats: _s, preemptions: _e, ...bare } = backend();
    const served = overChat(bare, DIALECTS);
    for (const name of ["lineOrder", "prepareRun", "countTokens", "stats", "preemptions"] as const) expect(served[name]).toBeUndefined();
  });
});
