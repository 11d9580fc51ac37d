// A batch file's plan counted over a backend that counts and remembers (no model): repeats by the canonical form,
// sampled lines never collapsed, remembered answers cached only with the cache on, bodies that will fail apart,
// generation bounds and the prompt tokens a shared opening spares.
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import type { InferenceBackend, InferenceRequest } from "../../openai/backend.js";
import { planFile } from "../../pipeline/plan.js";

const SYSTEM = "You are a careful assistant who answers in one short sentence, citing nothing and guessing nothing.";

const line = (id: string, body: Record<string, unknown>) =>
  JSON.stringify({ custom_id: id, method: "POST", url: "/v1/chat/completions", body: { model: "m", ...body } });
const ask = (content: string, extra: Record<string, unknown> = {}) => ({
  messages: [
    { role: "system", content: SYSTEM },
    { role: "user", content },
  ],
  ...extra,
});

const contentOf = (r: InferenceRequest) => (r.body as { messages: Array<{ content: string }> }).messages.at(-1)!.content;
const asked: string[] = [];
const backend = {
  info: { model: "m" },
  promptTokens: (r: InferenceRequest) => 40 + contentOf(r).length,
  remembered: async (r: InferenceRequest, o?: { cacheScope?: string }) => {
    asked.push(`${o?.cacheScope}:${contentOf(r)}`);
    return contentOf(r) === "warm";
  },
} as unknown as InferenceBackend;

const file = [
  line("a", ask("same", { temperature: 0, max_tokens: 10 })),
  line("b", { max_tokens: 10, temperature: 0.0, messages: ask("same").messages, user: "someone" }),
  line("c", ask("sampled", { temperature: 1, max_tokens: 10 })),
  line("d", ask("sampled", { temperature: 1, max_tokens: 10 })),
  line("e", { messages: "not a list", temperature: 0 }),
  line("f", ask("warm", { temperature: 0, max_tokens: 5, n: 2 })),
  line("g", ask("no bound", { temperature: 0 })),
].join("\n");

const plan = (on: boolean) =>
  planFile(Readable.from([Buffer.from(file)]), {
    endpoint: "/v1/chat/completions",
    backendFor: () => backend,
    cache: { on, scope: "team" },
  });

describe("a batch file's plan", () => {
  it("collapses deterministic repeats, counts remembered answers as cached, and never collapses sampled lines", async () => {
    asked.length = 0;
    const p = await plan(true);
    expect(p).toMatchObject({ lines: 7, invalid_lines: 1, distinct_requests: 5, cached_lines: 2, tokenizer: "model", model: "m" });
    expect(p.input_tokens).toBe(2 * 44 + 2 * 47 + 44 + 48);
    expect(p.cached_input_tokens).toBe(44 + 44);
    // Each line's bound times its answers; a chat line with none is counted at the estimate's 1,024.
    expect(p.max_output_tokens).toBe(10 + 10 + 10 + 10 + 5 * 2 + 1024);
    expect(p.cached_output_tokens).toBe(10 + 10);
    expect(asked).toEqual(["team:same", "team:warm", "team:no bound"]);
    // The computed lines share the system prompt: all but the first spare it.
    expect(p.shared_prefix_tokens).toBeGreaterThan(0);
  });

  it("with the cache off, every line is its own request and none is cached", async () => {
    asked.length = 0;
    const p = await plan(false);
    expect(p).toMatchObject({ lines: 7, invalid_lines: 1, distinct_requests: 6, cached_lines: 0, cached_input_tokens: 0 });
    expect(asked).toEqual([]);
  });

  it("estimates from characters where no backend counts, and says so", async () => {
    const p = await planFile(Readable.from([Buffer.from(file)]), {
      endpoint: "/v1/chat/completions",
      backendFor: () => undefined,
      cache: { on: true, scope: "s" },
    });
    expect(p.tokenizer).toBe("estimate");
    expect(p.cached_lines).toBe(1);
    expect(p.input_tokens).toBeGreaterThan(0);
  });
});
