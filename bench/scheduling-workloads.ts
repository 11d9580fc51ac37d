// Workloads where seeing the whole batch pays, each at any size, seeded so every run is the same:
// (a) template: one long system prompt and few-shot examples, then a short document per line;
// (b) varied: no shared prefix, prompts of about 10 to 1,000 tokens, max_tokens 16 to 512 (the two fit 1,024);
// (c) retrieval: documents asked 5 questions each, the lines shuffled (as a file joined from two tables is).
import { estimateLine, OrderPlanner } from "../pipeline/schedule.js";
import { rng } from "../testkit/fuzz.js";
import type { PeerRequest } from "../testkit/llama-server.js";
import { prompt, sharedSystemPrompt } from "../testkit/workload.js";
import type { Workload } from "./peer.js";

const WORDS = [
  "river",
  "garden",
  "lantern",
  "pocket",
  "meadow",
  "kettle",
  "window",
  "button",
  "ladder",
  "pebble",
  "candle",
  "basket",
  "ribbon",
  "feather",
  "puddle",
  "blanket",
  "teacup",
  "pillow",
  "wagon",
  "marble",
  "orchard",
  "harbor",
  "mitten",
  "acorn",
  "saddle",
  "tunnel",
  "violin",
  "compass",
  "cabin",
  "lemon",
];

/** Tokens one of WORDS takes: 3 on the generated models' tokenizer, 4.4 on stories260K's. */
export const TOKENS_PER_WORD = { generated: 3, stories: 4.4 } as const;

/** About `tokens` tokens of these words at `perWord` tokens a word. */
function words(random: () => number, tokens: number, perWord: number = TOKENS_PER_WORD.generated): string {
  const count = Math.max(1, Math.round(tokens / perWord));
  return Array.from({ length: count }, () => WORDS[Math.floor(random() * WORDS.length)]).join(" ");
}

function shuffle<T>(items: T[], random: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [items[i], items[j]] = [items[j], items[i]];
  }
  return items;
}

const FEW_SHOT = [
  { role: "user", content: `Document: ${prompt(1)}the dog found a ball.\nLabel the document's mood in one word.` },
  { role: "assistant", content: "happy" },
  { role: "user", content: `Document: ${prompt(2)}the rain would not stop.\nLabel the document's mood in one word.` },
  { role: "assistant", content: "sad" },
];

export function templateWorkload(lines: number, perWord: number = TOKENS_PER_WORD.generated, maxTokens = 16): Workload {
  const random = rng(1);
  const system = { role: "system", content: sharedSystemPrompt() };
  const requests: PeerRequest[] = Array.from({ length: lines }, (_, i) => ({
    url: "/v1/chat/completions",
    body: {
      messages: [
        system,
        ...FEW_SHOT,
        {
          role: "user",
          content: `Document: ${prompt(i)}${words(random, 20 + (i % 40), perWord)}.\nLabel the document's mood in one word.`,
        },
      ],
      max_tokens: maxTokens,
      temperature: 0,
    },
  }));
  return {
    name: "template",
    what: `${lines} chat lines: one ~360-token system prompt + few-shot, short documents, ${maxTokens} tokens`,
    requests,
    ctxPerSlot: 1024,
  };
}

export function variedWorkload(lines: number, perWord: number = TOKENS_PER_WORD.generated): Workload {
  const random = rng(2);
  const requests: PeerRequest[] = Array.from({ length: lines }, (_, i) => {
    const promptTokens = 10 + Math.floor(random() * 990);
    // Log-uniform from 16 to 512, within what the 1,024-token context leaves after the prompt.
    const wanted = Math.round(16 * 32 ** random());
    const max_tokens = Math.max(16, Math.min(wanted, 1000 - promptTokens));
    return { url: "/v1/completions", body: { prompt: `${i} ${words(random, promptTokens, perWord)}`, max_tokens, temperature: 0 } };
  });
  return {
    name: "varied",
    what: `${lines} completions, no shared prefix, prompts ~10-1,000 tokens, max_tokens 16-512`,
    requests,
    ctxPerSlot: 1024,
  };
}

export function retrievalWorkload(lines: number, perWord: number = TOKENS_PER_WORD.generated, maxTokens = 16): Workload {
  const random = rng(3);
  const documents = Array.from(
    { length: Math.ceil(lines / 5) },
    (_, d) => `Document ${d}: ${words(random, 250 + Math.floor(random() * 150), perWord)}.`,
  );
  const requests: PeerRequest[] = shuffle(
    Array.from({ length: lines }, (_, i) => ({
      url: "/v1/completions" as const,
      body: {
        prompt: `${documents[Math.floor(i / 5)]}\nQuestion ${i % 5}: where is the ${WORDS[i % WORDS.length]}?\nAnswer:`,
        max_tokens: maxTokens,
        temperature: 0,
      },
    })),
    random,
  );
  return {
    name: "retrieval",
    what: `${lines} completions: ${documents.length} documents (~250-400 tokens) x 5 questions, shuffled, ${maxTokens} tokens`,
    requests,
    ctxPerSlot: 1024,
  };
}

/**
 * Prefix families: `families` preambles of ~400 tokens, each followed by a short question; the lines shuffled,
 * answers of up to 37 tokens. One template over many items, the shape batch users run most.
 */
export function familiesWorkload(lines: number, families: number, perWord: number = TOKENS_PER_WORD.generated, maxTokens = 37): Workload {
  const random = rng(4 + families);
  const preambles = Array.from({ length: families }, (_, f) => `Instructions for set ${f}: ${words(random, 400, perWord)}.`);
  const requests: PeerRequest[] = shuffle(
    Array.from({ length: lines }, (_, i) => ({
      url: "/v1/completions" as const,
      body: {
        prompt: `${preambles[i % families]}\nItem ${i}: ${words(random, 10 + (i % 20), perWord)}?\nAnswer:`,
        max_tokens: maxTokens,
        temperature: 0,
      },
    })),
    random,
  );
  return {
    name: `families-${families}`,
    what: `${lines} completions: ${families} preambles of ~400 tokens, a short item each, shuffled, ${maxTokens} tokens`,
    requests,
    ctxPerSlot: 1024,
  };
}

/** The scheduling workloads the bench compares, `lines` lines each: template, varied, retrieval, families-8, families-64. */
export function schedulingWorkloads(lines: number, perWord: number = TOKENS_PER_WORD.generated): Workload[] {
  return [
    templateWorkload(lines, perWord),
    variedWorkload(lines, perWord),
    retrievalWorkload(lines, perWord),
    familiesWorkload(lines, 8, perWord),
    familiesWorkload(lines, 64, perWord),
  ];
}

/** One line as the engine takes it: a completion's prompt or a chat's messages, and its token limit. */
export type EngineRequest =
  | { prompt: string; maxTokens: number }
  | { messages: { role: "system" | "user" | "assistant"; content: string }[]; maxTokens: number };

/** The workload's lines in the order the service starts them (longest first, families together). */
export function engineRequests(name: string, lines: number): EngineRequest[] {
  const workloads = schedulingWorkloads(lines);
  const workload = workloads.find((w) => w.name === name);
  if (!workload) throw new Error(`unknown workload ${name}: ${workloads.map((w) => w.name).join(", ")}`);
  const { requests } = workload;
  const planner = new OrderPlanner();
  for (const [i, r] of requests.entries()) planner.add({ lineNo: i, start: 0, end: 0, estimate: estimateLine(r.url, r.body) });
  const { order } = planner.plan("cost");
  return Array.from(order, (i): EngineRequest => {
    const body = requests[i].body as {
      prompt?: string;
      messages?: { role: "system" | "user" | "assistant"; content: string }[];
      max_tokens: number;
    };
    return body.messages
      ? { messages: body.messages, maxTokens: body.max_tokens }
      : { prompt: body.prompt ?? "", maxTokens: body.max_tokens };
  });
}
