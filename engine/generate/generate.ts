// The generation loop shared by completions and chat: one sequence, one prompt, token by token, `n` times.
// A direct sequence.evaluate loop rather than LlamaCompletion: it measured as fast or faster for many short
// parallel requests, counts real tokens, never truncates or shifts the prompt behind our
// back, and keeps the sequence's cache for the next request's shared prefix (and for the next of n choices).
import { randomInt } from "node:crypto";
import {
  type ControlledEvaluateInputItem,
  type EvaluationPriority,
  type LlamaContextSequence,
  type LlamaGrammar,
  LlamaGrammarEvaluationState,
  type LlamaModel,
  type SequenceEvaluateOptions,
  type Token,
  TokenBias,
} from "node-llama-cpp";
import { completionTooLong } from "../../openai/errors.js";
import { abortError, asEngineError, contextLengthExceeded, invalidRequest, throwIfAborted } from "../errors.js";
import type { SequencePool } from "../pool/sequence-pool.js";
import type {
  Borrower,
  Choice,
  FinishReason,
  GeneratedTokenLogprob,
  GenerationResult,
  PromptTokenLogprob,
  SamplingParams,
} from "../types.js";
import { type TokenScores, tokenLogprobs } from "./logprobs.js";
import { scorePrompt } from "./prompt-logprobs.js";
import { findStop } from "./stops.js";

export interface GenerationRequest {
  /** The whole prompt, beginning-of-sequence token included. */
  tokens: Token[];
  /** Most tokens to generate; null: as many as the context has room for. */
  maxTokens: number | null;
  /** The request field that asked for maxTokens; set, a maxTokens past the context is refused instead of capped. */
  maxTokensParam?: string | null;
  temperature: number;
  topP: number;
  /** Sample among this many most likely tokens (Anthropic's top_k); 0: no cut, as OpenAI samples. */
  topK: number;
  seed: number;
  stopStrings: string[];
  /** Tokens that end the answer besides the model's end-of-generation tokens (e.g. a chat turn's end marker). */
  stopTokens: ReadonlySet<Token>;
  frequencyPenalty: number;
  presencePenalty: number;
  logitBias: ReadonlyMap<number, number> | null;
  grammar: LlamaGrammar | null;
  /** Whitespace the grammar lets the model add after the answer is not part of it. */
  trimTrailingWhitespace: boolean;
  /** Alternatives per token to report; null: no log probabilities. */
  logprobs: number | null;
  /** Alternatives per prompt token to report with the prompt's own log probabilities; null: none (prompt-logprobs.ts). */
  promptLogprobs?: number | null;
  /** Leading tokens the tokenizer added to the prompt's text (its beginning-of-sequence token). */
  addedTokens?: number;
  n: number;
  onText?: SamplingParams["onText"];
  onPrompt?: SamplingParams["onPrompt"];
}

type Resolved = Omit<
  GenerationRequest,
  "tokens" | "stopTokens" | "grammar" | "trimTrailingWhitespace" | "onText" | "onPrompt" | "addedTokens"
>;

/** A detokenized piece ending in this is an incomplete UTF-8 character: wait for the next byte token. */
const REPLACEMENT_CHAR = "\uFFFD";
const MAX_PARTIAL_TOKENS = 4;

/** Sampling parameters checked and defaulted as the OpenAI API does (temperature 1, top_p 1, n 1). */
export function resolveSampling(params: SamplingParams, defaultMaxTokens: number | null): Resolved {
  const { maxTokens, topP = 1, topK = 0, stop = [], seed, frequencyPenalty = 0, presencePenalty = 0, n = 1 } = params;
  let { temperature = 1 } = params;
  if (maxTokens != null && (!Number.isInteger(maxTokens) || maxTokens < 0)) {
    throw invalidRequest(`maxTokens must be a non-negative integer, got ${maxTokens}.`);
  }
  if (!Number.isFinite(temperature) || temperature < 0) throw invalidRequest(`temperature must be >= 0, got ${temperature}.`);
  if (!Number.isFinite(topP) || topP < 0 || topP > 1) throw invalidRequest(`topP must be in [0, 1], got ${topP}.`);
  if (!Number.isInteger(topK) || topK < 0) throw invalidRequest(`topK must be a non-negative integer, got ${topK}.`);
  if (!Array.isArray(stop) || stop.some((s) => typeof s !== "string")) throw invalidRequest("stop must be a list of strings.");
  if (seed != null && !Number.isFinite(seed)) throw invalidRequest(`seed must be a number, got ${seed}.`);
  if (!Number.isInteger(n) || n < 1) throw invalidRequest(`n must be a positive integer, got ${n}.`);
  // A nucleus of probability 0 holds only the most likely token: greedy, as temperature 0 is.
  if (topP === 0) temperature = 0;
  return {
    maxTokens: maxTokens ?? defaultMaxTokens,
    maxTokensParam: maxTokens != null ? (params.maxTokensParam ?? null) : null,
    temperature,
    topP: topP === 0 ? 1 : topP,
    topK,
    stopStrings: stop.filter((s) => s.length > 0),
    // node-llama-cpp's own default seed is the current second, which would give every request started in the
    // same second the same "random" answer.
    seed: seed == null ? randomInt(2 ** 31) : ((Math.trunc(seed) % 2 ** 32) + 2 ** 32) % 2 ** 32,
    frequencyPenalty,
    presencePenalty,
    logitBias: params.logitBias && params.logitBias.size > 0 ? params.logitBias : null,
    logprobs: params.logprobs ?? null,
    promptLogprobs: params.promptLogprobs ?? null,
    n,
  };
}

/** One generation: the pool it runs on, the model, the request, and who waits for it. */
export interface GenerationRun {
  pool: SequencePool;
  model: LlamaModel;
  req: GenerationRequest;
  signal?: AbortSignal;
  /** Its lane and who hears it begin, told to the pool at each lend (a batch line that yields is lent anew). */
  borrower: Borrower;
}

export async function generate(run: GenerationRun): Promise<GenerationResult> {
  const { pool, model, req, signal, borrower } = run;
  const promptTokens = req.tokens.length;
  if (promptTokens === 0) throw invalidRequest("The prompt is empty.");
  // Evaluated tokens are the prompt plus all but the last generated token: this never overflows the sequence.
  const room = pool.contextSize - promptTokens;
  if (room < 1) throw contextLengthExceeded(promptTokens, pool.contextSize - 1);
  if (req.maxTokensParam && req.maxTokens !== null && req.maxTokens > room)
    throw completionTooLong(pool.contextSize, promptTokens, req.maxTokens, req.maxTokensParam);
  const maxTokens = Math.min(req.maxTokens ?? room, room);
  throwIfAborted(signal);
  const unanswered = () => Array.from({ length: req.n }, (): Choice => ({ text: "", completionTokens: 0, finishReason: "length" }));
  const scored = req.promptLogprobs ?? null;
  if (maxTokens === 0 && scored === null) {
    const choices = unanswered();
    return { ...choices[0], promptTokens, completionTokens: 0, cachedPromptTokens: 0, choices };
  }

  // The sequence may change: a batch line gives its own to an interactive request and resumes on another.
  const lease: Lease = { sequence: await pool.acquire(req.tokens, borrower, signal) };
  let failed = false;
  try {
    let promptLogprobs: PromptTokenLogprob[] | undefined;
    if (scored !== null) {
      // Every position's logits are read, so nothing comes from a cache; the generation then evaluates the last token.
      await pool.prepareWhole(lease.sequence!, borrower.cacheScope);
      const priority = pool.batchTag(lease.sequence!);
      promptLogprobs = await scorePrompt(lease.sequence!, model, req.tokens, scored, req.addedTokens ?? 0, priority);
      throwIfAborted(signal);
    }
    const choices: Choice[] = maxTokens === 0 ? unanswered() : [];
    let cachedPromptTokens = 0;
    // The choices take turns on one sequence: each after the first finds the prompt in the cache, so the prompt
    // is evaluated once whatever n is (only its last token again, for the first new token's logits).
    for (let i = 0; i < (maxTokens === 0 ? 0 : req.n); i++) {
      const cached = await pool.prepare(lease.sequence!, req.tokens, borrower.cacheScope);
      if (i === 0) {
        cachedPromptTokens = promptLogprobs ? 0 : cached;
        req.onPrompt?.({ promptTokens, cachedTokens: cachedPromptTokens });
      }
      throwIfAborted(signal);
      const onText = req.onText && ((text: string) => req.onText?.(i, text));
      choices.push(await generateChoice({ ...run, lease, cached, maxTokens, seed: (req.seed + i) % 2 ** 32, onText }));
    }
    const completionTokens = choices.reduce((sum, c) => sum + c.completionTokens, 0);
    const result: GenerationResult = { ...choices[0], promptTokens, completionTokens, cachedPromptTokens, choices };
    if (promptLogprobs) result.promptLogprobs = promptLogprobs;
    return result;
  } catch (err) {
    failed = !(err instanceof Error && err.name === "AbortError");
    throw asEngineError(err);
  } finally {
    if (lease.sequence) await pool.release(lease.sequence, failed);
  }
}

/** The sequence a request holds; null while a yielding batch line waits for another. */
interface Lease {
  sequence: LlamaContextSequence | null;
}

/** One of a generation's n choices. */
interface ChoiceRun extends GenerationRun {
  lease: Lease;
  /** Leading prompt tokens the sequence's cache holds already. */
  cached: number;
  maxTokens: number;
  seed: number;
  /** Told the choice's answer as it becomes safe to show (no stop string can take it back). */
  onText?: (text: string) => void;
}

async function generateChoice(run: ChoiceRun): Promise<Choice> {
  const { pool, lease, model, req, signal, maxTokens } = run;
  const generated: Token[] = [];
  const logprobs: GeneratedTokenLogprob[] | undefined = req.logprobs === null ? undefined : [];
  const answer = new AnswerText(model, req, run.onText);
  let finishReason: FinishReason = "length";
  const options = choiceOptions(model, req, generated, run.seed, pool);
  let input = req.tokens.slice(run.cached);
  for (let sequence = lease.sequence!; ; ) {
    let yielded = false;
    let first = true;
    for await (const { token, scores } of evaluate(sequence, pool, req, input, options, generated.length)) {
      // The prompt is in the cache now: requests sharing its prefix on this context may copy it.
      if (first) pool.evaluated(sequence);
      first = false;
      if (logprobs && scores) {
        const before = [...req.tokens.slice(-8), ...generated.slice(-8)].slice(-8);
        logprobs.push({ ...tokenLogprobs(model, before, token, scores, req.logprobs ?? 0), offset: answer.text.length });
      }
      generated.push(token);
      let stopped = model.isEogToken(token) || req.stopTokens.has(token);
      if (!stopped) stopped = answer.push(token);
      // The end-of-turn token is not part of the answer.
      else logprobs?.pop();
      if (stopped) finishReason = "stop";
      yielded = !stopped && generated.length < maxTokens && !signal?.aborted && pool.mustYield(sequence);
      if (stopped || generated.length >= maxTokens || signal?.aborted || yielded) {
        // Said before the loop is left: closing node-llama-cpp's generator takes a few promise hops, and the
        // other sequences' next decode should not wait for this one meanwhile (batch-order.ts).
        pool.finished(sequence);
        break;
      }
      // A sibling's copy or cut takes the context's lock on the prebuilt build: the next token waits for it.
      const hold = pool.hold(sequence);
      if (hold) await hold;
    }
    if (!yielded) break;
    ({ sequence, input } = await resumeOnAnother(run, sequence, generated));
  }
  if (finishReason === "length" && generated.length < maxTokens && signal?.aborted) throw abortError(signal);
  if (answer.finish()) finishReason = "stop";
  const { text, stoppedBy } = answer;
  const choice: Choice = { text, completionTokens: generated.length, finishReason };
  if (stoppedBy !== undefined) choice.stoppedBy = stoppedBy;
  // Tokens that began past a stop string's cut are not part of the answer.
  if (logprobs) choice.logprobs = logprobs.filter((l) => l.offset < text.length || l.offset === 0);
  return choice;
}

/**
 * A yielding batch line gives its sequence to the interactive request waiting and goes on once the pool lends it
 * another, in its own lane. The tokens stay the line's: on the sequence it gets back they are evaluated again with
 * the prompt (or copied where a sibling holds the prompt), and generation goes on from the last one.
 */
async function resumeOnAnother(
  { pool, lease, req, borrower, signal }: ChoiceRun,
  sequence: LlamaContextSequence,
  generated: readonly Token[],
): Promise<{ sequence: LlamaContextSequence; input: Token[] }> {
  const sofar = [...req.tokens, ...generated];
  lease.sequence = null;
  const next = await pool.resume(sequence, sofar, borrower, signal);
  lease.sequence = next;
  const kept = await pool.prepare(next, sofar, borrower.cacheScope);
  pool.reevaluated(sofar.length - 1 - kept);
  return { sequence: next, input: sofar.slice(kept) };
}

/**
 * A choice's answer as its tokens come: detokenized with the tokens before them (so a word-initial token keeps its
 * leading space), cut before a stop string, and told to onText as far as no stop string can take it back.
 */
class AnswerText {
  text = "";
  stoppedBy: string | undefined;
  private pending: Token[] = [];
  private readonly history: Token[];
  /** Characters of `text` told to onText so far. */
  private sent = 0;

  constructor(
    private readonly model: LlamaModel,
    private readonly req: GenerationRequest,
    private readonly onText?: (text: string) => void,
  ) {
    this.history = req.tokens.slice(-8);
  }

  /** A generated token that is not an end token; true when it completes a stop string. */
  push(token: Token): boolean {
    this.pending.push(token);
    const piece = this.model.detokenize(this.pending, false, this.history);
    const partial = piece.endsWith(REPLACEMENT_CHAR) && this.pending.length < MAX_PARTIAL_TOKENS;
    return !partial && this.flush(piece);
  }

  /** The answer is whole: what is pending is appended (true when that completes a stop string), then all of it told. */
  finish(): boolean {
    const stopped = this.pending.length > 0 && this.flush();
    if (this.req.trimTrailingWhitespace) this.text = this.text.trimEnd();
    this.send(this.text.length);
    return stopped;
  }

  /** Append the pending tokens' text; true when that completes a stop string (the text is then cut before it). */
  private flush(piece = this.model.detokenize(this.pending, false, this.history)): boolean {
    const checkedUpTo = this.text.length;
    this.text += piece;
    this.history.push(...this.pending);
    this.pending = [];
    const { stopStrings, trimTrailingWhitespace } = this.req;
    const hit = findStop(this.text, stopStrings, checkedUpTo);
    if (!hit) {
      if (this.onText) this.send(this.text.length - heldBack(this.text, stopStrings, trimTrailingWhitespace));
      return false;
    }
    this.text = this.text.slice(0, hit.index);
    this.stoppedBy = hit.stop;
    return true;
  }

  private send(upTo: number): void {
    if (upTo <= this.sent) return;
    this.onText?.(this.text.slice(this.sent, upTo));
    this.sent = upTo;
  }
}

/**
 * What node-llama-cpp samples with, before penalties, bias and grammar. OpenAI sampling has no top-k or min-p cut;
 * Anthropic's top_k asks for one. node-llama-cpp makes a top-k of 0 one of the whole vocabulary, which sorts a
 * candidate for every token before each sample (38% of the engine's CPU at temperature 1 on the generated `small`),
 * and an absent one 40; null leaves the sampler out.
 */
export function samplerOptions(
  req: Pick<Resolved, "temperature" | "topP" | "topK">,
  seed: number,
  priority?: EvaluationPriority,
): SequenceEvaluateOptions {
  return {
    temperature: req.temperature,
    topP: req.topP,
    topK: req.topK > 0 ? req.topK : (null as unknown as number),
    minP: 0,
    seed,
    yieldEogToken: true,
    ...(priority === undefined ? {} : { evaluationPriority: priority }),
  };
}

/** A choice's sampler options, kept over its segments: the grammar's state and the penalties' tokens go on. */
function choiceOptions(model: LlamaModel, req: GenerationRequest, generated: Token[], seed: number, pool: SequencePool) {
  // Each segment's evaluation names its sequence's place in the batch (evaluate).
  const options = samplerOptions(req, seed);
  if (req.frequencyPenalty !== 0 || req.presencePenalty !== 0) {
    // OpenAI's penalties count the tokens sampled so far (not the prompt's); llama.cpp's penalties sampler
    // subtracts count x frequency and (count > 0) x presence from each logit, as OpenAI documents.
    options.repeatPenalty = {
      punishTokens: () => generated,
      maxPunishTokens: Math.max(1, req.maxTokens ?? pool.contextSize),
      penalty: 1,
      frequencyPenalty: req.frequencyPenalty,
      presencePenalty: req.presencePenalty,
    };
  }
  if (req.logitBias) {
    const bias = new TokenBias(model.tokenizer);
    for (const [token, value] of req.logitBias) bias.set(token as Token, { logit: value });
    options.tokenBias = bias;
  }
  // The grammar's state has taken each token sampled (node-llama-cpp's sampler accepts it), so a resumed line's
  // grammar goes on where it stopped.
  if (req.grammar) options.grammarEvaluationState = new LlamaGrammarEvaluationState({ model, grammar: req.grammar });
  return options;
}

/**
 * node-llama-cpp's evaluation of `input` on `sequence` and the tokens after it, with what log probabilities are
 * computed from when they were asked for: where the chain leaves the logits as they are and there is no grammar, the
 * top tokens' logits and their normaliser (`traced`, whose per-token seeds count from `from`, the tokens generated
 * before); else the full distribution, which node-llama-cpp hands over as a map of the whole vocabulary per token.
 */
async function* evaluate(
  sequence: LlamaContextSequence,
  pool: SequencePool,
  req: GenerationRequest,
  input: Token[],
  shared: SequenceEvaluateOptions,
  from: number,
): AsyncGenerator<{ token: Token; scores?: TokenScores }> {
  const options = { ...shared, evaluationPriority: pool.batchTag(sequence) };
  if (req.logprobs !== null && !req.grammar && (req.temperature === 0 || (req.temperature === 1 && req.topP === 1 && req.topK === 0))) {
    // Seeded per token by its place already.
    yield* traced(sequence, input, options, req.logprobs, from);
    return;
  }
  // A sampled line resumed on a new sampler draws from a seed of where it resumed (the same seed, the same answer).
  if (from > 0 && options.seed !== undefined) options.seed = tokenSeed(options.seed, from);
  if (req.logprobs === null) {
    for await (const token of sequence.evaluate(input, options)) yield { token };
  } else {
    const { temperature } = req;
    for await (const { token, probabilities } of sequence.evaluateWithMetadata(input, { probabilities: true }, options))
      yield { token, scores: { kind: "probabilities", probabilities, temperature } };
  }
}

/**
 * A line with log probabilities whose chain leaves the logits as they are (greedy, or temperature 1 with no cut), a
 * token at a time through `controlledEvaluate`, which can ask the addon for only the top logits and their
 * normaliser. It makes a sampler per call, so a sampled line's seed is drawn again for each token from the line's
 * seed and the token's place (the same seed gives the same answer); it takes no grammar.
 */
async function* traced(
  sequence: LlamaContextSequence,
  input: Token[],
  options: SequenceEvaluateOptions,
  top: number,
  from: number,
): AsyncGenerator<{ token: Token; scores: TokenScores }> {
  // A greedy line's token is the largest logit, so one alternative is the chosen one; a sampled line needs the
  // largest for the normaliser. More make the addon sort the vocabulary (a partial sort on the patched build).
  const { temperature, topP, topK, minP, seed = 0, tokenBias, repeatPenalty } = options;
  const includeTop = temperature ? Math.max(1, top) : top > 1 ? top : 0;
  const logits = { filter: { tokens: [], includeSelected: true, includeTop } };
  let tokens = input;
  for (let index = from; ; index++) {
    // The line's own sampler options (samplerOptions, with its bias and penalties), seeded per token.
    const sampling = { temperature, topP, topK, minP, seed: tokenSeed(seed, index), tokenBias, repeatPenalty };
    const generateNext = { token: true, totalLogitWeight: true, logits, options: sampling };
    const last = tokens.length - 1;
    const items = tokens.map((t, i): ControlledEvaluateInputItem => (i === last ? [t, { generateNext }] : t));
    const next = (await sequence.controlledEvaluate(items, { evaluationPriority: options.evaluationPriority }))[last]?.next;
    if (next?.token == null || !next.logits || next.totalLogitWeight === undefined) throw new Error("Failed to sample next token");
    yield { token: next.token, scores: { kind: "logits", logits: next.logits, total: next.totalLogitWeight } };
    tokens = [next.token];
  }
}

/** A seed per token from a line's seed (murmur3's finaliser); never llama.cpp's "random" seed, 2^32 - 1. */
export function tokenSeed(seed: number, index: number): number {
  const mix = (h: number) => {
    let x = h >>> 0;
    x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
    x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
    return (x ^ (x >>> 16)) >>> 0;
  };
  const out = mix(seed ^ mix(index + 1));
  return out === 0xffffffff ? 0xfffffffe : out;
}

/**
 * Characters at the end of `text` not yet safe to stream: the longest end that a stop string begins with (it may
 * complete and be cut), and trailing whitespace where the answer's end is trimmed.
 */
export function heldBack(text: string, stops: readonly string[], trimmed: boolean): number {
  let held = trimmed ? text.length - text.trimEnd().length : 0;
  for (const stop of stops) {
    for (let k = Math.min(stop.length - 1, text.length); k > held; k--) {
      if (text.endsWith(stop.slice(0, k))) {
        held = k;
        break;
      }
    }
  }
  return held;
}
