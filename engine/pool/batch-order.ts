// Which tokens go into each decode of the shared context, in which order, and when.
//
// Two things in node-llama-cpp 3.22.1 kept "N sequences decoded together" from being one pass per step:
// - Order. llama.cpp keeps one KV stream per sequence (kv_unified off) and cuts a batch into micro-batches
//   of *consecutive* sequence ids with equal token counts, each a full pass over the weights. Items were
//   queued in the order their last token was sampled, effectively random: 8 sequences made 4.2 passes
//   per step, 16 made 6. Sorted by sequence id a step is one pass (plus one for the tail of a prompt).
// - Timing. After a decode, node-llama-cpp decodes again at once with whatever is queued, while the
//   sequences whose token was sampled last are still a few promise hops from queueing their next one.
//   The sequences split into groups decoded in turn: 8 sequences averaged 3.7 per step. Waiting those
//   few hops (the strategy returns nothing, and node-llama-cpp's loop comes straight back) brings every
//   sequence of the last step into the next: 8.0 per step, measured.
// Measurements in docs/performance.md. The batch item carries no sequence id, so each sequence tags its
// tokens through `evaluationPriority`, which only prioritization strategies read.
import type { BatchItem, CustomBatchingPrioritizationStrategy, EvaluationPriority, PrioritizedBatchItem } from "node-llama-cpp";
import { microBatches } from "./micro-batches.js";

/**
 * The tag a sequence's tokens carry: its position in the context (0-based), shifted to be positive.
 * node-llama-cpp declares `EvaluationPriority` as 1-5 but hands the value to a custom strategy untouched, and
 * the strategy is the only reader (tests/engine/batch-order.int.test.ts checks both against the real library).
 * Should a later version clamp or drop it, BatchOrder sees tags it never gave and falls back to plain
 * ordering without the lockstep wait, so batching degrades but never stalls.
 */
export function sequenceTag(index: number): EvaluationPriority {
  return (index + 1) as EvaluationPriority;
}

/** Whether `priority` is a tag sequenceTag gave to one of `sequences` sequences. */
export const isSequenceTag = (priority: number, sequences: number) => Number.isInteger(priority) && priority >= 1 && priority <= sequences;

/**
 * How many times a step waits for a sequence of the last step to queue its next token. The wait is a
 * turn of node-llama-cpp's dispatch loop (microtasks only, no timer); 3 turns sufficed when measured.
 * The bound keeps a sequence that will not come back (its request ended) from holding the step long.
 */
export const MAX_WAIT_TURNS = 32;

/**
 * Every sequence with pending tokens advances by one token, in sequence order; room left in the batch
 * then goes to the longer inputs (prompts), still in order.
 */
export function planBatch(items: readonly BatchItem[], size: number): PrioritizedBatchItem[] {
  const planned: PrioritizedBatchItem[] = [...items]
    .sort((a, b) => a.evaluationPriority - b.evaluationPriority)
    .map((item) => ({ item, processAmount: 0 }));
  let room = size;
  for (const p of planned) {
    if (room === 0) break;
    p.processAmount = 1;
    room--;
  }
  for (const p of planned) {
    if (room === 0) break;
    const more = Math.min(p.item.tokens.length - p.processAmount, room);
    p.processAmount += more;
    room -= more;
  }
  // node-llama-cpp reads an amount of 0 as 1, so items that got nothing must not be returned.
  return planned.filter((p) => p.processAmount > 0);
}

/** Each item has a tag of its own (a sequence queues one decode at a time), within the tags given out. */
function tagsIntact(items: readonly BatchItem[], sequences: number): boolean {
  const seen = new Set<number>();
  for (const i of items) {
    if (!isSequenceTag(i.evaluationPriority, sequences) || seen.has(i.evaluationPriority)) return false;
    seen.add(i.evaluationPriority);
  }
  return true;
}

/**
 * The batching strategy of one context: sequence order, and lockstep across steps. A prompt of the interactive
 * lane waiting for its first token goes into a step of its own, at once: beside a full batch a step of the batch's
 * sequences takes tens of milliseconds, and the first token would wait for one more of them after the one in flight.
 */
export class BatchOrder {
  /** Sequences decoded in the last step whose requests go on: the next step waits for them. */
  private readonly lastStep = new Set<EvaluationPriority>();
  /** Sequences of the interactive lane whose first token has not come yet. */
  private readonly urgent = new Set<EvaluationPriority>();
  private turns = 0;
  /**
   * Decodes planned, the sequences and tokens in them, turns spent waiting, and the passes over the weights
   * llama.cpp cuts them into (micro-batches.ts; counted while the tags are intact): how well the batching works.
   */
  readonly stats = { steps: 0, sequences: 0, tokens: 0, waitTurns: 0, microBatches: 0 };
  /** Steps given to interactive prompts alone. */
  urgentSteps = 0;
  /** Set once an item came with a tag this order never gave (see sequenceTag): no lockstep from then on. */
  untagged = false;

  /**
   * `sequences`: how many sequences tag their tokens (0: not checked). `onStep` hears the tokens of each planned
   * step just before it is decoded (step-threads.ts). `unified`: the context keeps one KV stream for all.
   */
  constructor(
    private readonly onStep?: (tokens: number) => void,
    private readonly sequences = 0,
    private readonly unified = false,
  ) {}

  readonly strategy: CustomBatchingPrioritizationStrategy = ({ items, size }) => {
    if (this.sequences > 0 && !this.untagged && !tagsIntact(items, this.sequences)) this.untagged = true;
    const urgent = this.urgent.size > 0 && !this.untagged ? items.filter((i) => this.urgent.has(i.evaluationPriority)) : [];
    if (urgent.length === 0 && !this.untagged && this.turns < MAX_WAIT_TURNS && this.missing(items)) {
      this.turns++;
      this.stats.waitTurns++;
      return [];
    }
    this.turns = 0;
    if (urgent.length > 0) this.urgentSteps++;
    const planned = planBatch(urgent.length > 0 ? urgent : items, size);
    this.stats.steps++;
    this.stats.sequences += planned.length;
    this.lastStep.clear();
    let tokens = 0;
    for (const p of planned) {
      this.lastStep.add(p.item.evaluationPriority);
      tokens += p.processAmount;
    }
    this.stats.tokens += tokens;
    if (!this.untagged) {
      const parts = planned.map((p) => ({ sequence: p.item.evaluationPriority - 1, tokens: p.processAmount }));
      this.stats.microBatches += microBatches(parts, size, this.unified);
    }
    this.onStep?.(tokens);
    return planned;
  };

  /** The sequence's request is over: no step waits for its next token. */
  leave(tag: EvaluationPriority): void {
    this.lastStep.delete(tag);
    this.urgent.delete(tag);
  }

  /** An interactive request on the sequence waits for its first token (true), or has it (false). */
  urge(tag: EvaluationPriority, waiting: boolean): void {
    if (waiting) this.urgent.add(tag);
    else this.urgent.delete(tag);
  }

  private missing(items: readonly BatchItem[]): boolean {
    if (this.lastStep.size === 0) return false;
    let present = 0;
    for (const item of items) if (this.lastStep.has(item.evaluationPriority)) present++;
    return present < this.lastStep.size;
  }
}
