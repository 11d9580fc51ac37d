// The hand-tuned baseline: node-llama-cpp used directly, none of the project's code on the request path.
// One context with `sequences` sequences; each sequence is a worker that takes the next prompt, evaluates
// it with its own greedy loop and keeps the tokens (text is decoded once at the end). One configuration
// per process, so its memory and threads are its own.
// --batching: "default" is node-llama-cpp's own; "ordered" hands each decode its tokens in sequence-id
// order, so llama.cpp runs a step as one pass over the weights instead of several; "lockstep" also waits
// a few loop turns for the sequences of the last step, so they all stay in each decode. Both re-implement
// the ideas of engine/pool/batch-order.ts here, without the project's code.
// --threads 0 leaves threads to node-llama-cpp (its default), as a script that tunes nothing would.
// --budget-seconds N: generation stops after N seconds (for configurations too slow to run in full), even
// within a request; throughput is then over the tokens generated.
//   npx tsx bench/llama-baseline.ts --model M --threads 1 --sequences 8 --requests 256 --tokens 64 [--batching lockstep]
import { parseArgs } from "node:util";
import { type BatchItem, type CustomBatchingPrioritizationStrategy, type EvaluationPriority, getLlama, type Token } from "node-llama-cpp";
import { prompt } from "../testkit/workload.js";
import { readMemory } from "./proc-stats.js";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    threads: { type: "string", default: "1" },
    sequences: { type: "string", default: "8" },
    requests: { type: "string", default: "256" },
    tokens: { type: "string", default: "64" },
    context: { type: "string", default: "1024" },
    batching: { type: "string", default: "default" },
    "budget-seconds": { type: "string", default: "0" },
  },
});
if (!values.model) throw new Error("--model is required");
const threads = Number(values.threads);
const sequences = Number(values.sequences);
const requests = Number(values.requests);
const maxTokens = Number(values.tokens);
const budgetMs = Number(values["budget-seconds"]) * 1000;

const llama = await getLlama({ build: "never", skipDownload: true, progressLogs: false });
if (threads > 0) llama.maxThreads = threads;
const model = await llama.loadModel({ modelPath: values.model, gpuLayers: llama.gpu === false ? 0 : "auto" });
// Items are tagged with their sequence number through evaluationPriority; whole items, in that order.
const inOrder = (items: readonly BatchItem[], size: number) => {
  let room = size;
  return [...items]
    .sort((a, b) => a.evaluationPriority - b.evaluationPriority)
    .map((item) => {
      const processAmount = Math.min(item.tokens.length, room);
      room -= processAmount;
      return { item, processAmount };
    })
    .filter((p) => p.processAmount > 0);
};
// The sequences of the last step; a step waits up to 32 turns of the dispatch loop for them to queue again.
const last = new Set<number>();
let turns = 0;
const lockstep: CustomBatchingPrioritizationStrategy = ({ items, size }) => {
  const present = items.filter((i) => last.has(i.evaluationPriority)).length;
  if (present < last.size && turns++ < 32) return [];
  turns = 0;
  const planned = inOrder(items, size);
  last.clear();
  for (const p of planned) last.add(p.item.evaluationPriority);
  return planned;
};
const strategies: Record<string, CustomBatchingPrioritizationStrategy | undefined> = {
  default: undefined,
  ordered: ({ items, size }) => inOrder(items, size),
  lockstep,
};
if (!(values.batching in strategies)) throw new Error(`--batching must be one of ${Object.keys(strategies).join(", ")}`);
const strategy = strategies[values.batching];
const context = await model.createContext({
  sequences,
  contextSize: Number(values.context),
  threads: threads > 0 ? threads : undefined,
  flashAttention: llama.gpu !== false,
  batching: strategy ? { itemPrioritizationStrategy: strategy } : undefined,
});
const loaded = readMemory();

let next = 0;
let ran = 0;
const latencies: number[] = [];
let generated = 0;
let promptTokens = 0;
const started = performance.now();

async function worker(index: number): Promise<void> {
  const sequence = context.getSequence();
  const evaluationPriority = (index + 1) as EvaluationPriority;
  for (let i = next++; i < requests; i = next++) {
    if (budgetMs > 0 && performance.now() - started > budgetMs) break;
    ran++;
    const tokens = model.tokenize(prompt(i), false);
    if (model.tokens.bos != null && model.tokens.shouldPrependBosToken) tokens.unshift(model.tokens.bos);
    promptTokens += tokens.length;
    await sequence.clearHistory();
    const out: Token[] = [];
    for await (const token of sequence.evaluate(tokens, { temperature: 0, yieldEogToken: true, evaluationPriority })) {
      const eog = model.isEogToken(token);
      if (!eog) out.push(token);
      const overBudget = budgetMs > 0 && performance.now() - started > budgetMs;
      if (eog || out.length >= maxTokens || overBudget) {
        // Done: the next step must not wait for this sequence.
        last.delete(evaluationPriority);
        break;
      }
    }
    // The text is what a caller wants; decoding it once costs little and keeps the comparison fair.
    model.detokenize(out);
    generated += out.length;
    latencies.push(performance.now() - started);
  }
}

await Promise.all(Array.from({ length: sequences }, (_, i) => worker(i)));
const seconds = (performance.now() - started) / 1000;
const end = readMemory();
console.log(
  JSON.stringify({
    kind: "baseline",
    batching: values.batching,
    threads: threads > 0 ? threads : context.currentThreads,
    sequences,
    requests: ran,
    seconds,
    generated,
    promptTokens,
    latenciesMs: latencies,
    modelRss: loaded?.rss ?? null,
    peakRss: end?.peak ?? null,
  }),
);
await context.dispose();
await model.dispose();
await llama.dispose();
