// The order a batch's lines start in. A server takes requests as they come; a batch runner holds the whole file
// before the first one runs, so it can choose:
// - Longest first (LPT). Each line's work is estimated from its prompt and its token limit, and the costly lines
//   start first, so a batch does not end with one long request decoding alone while the other contexts idle.
//   Costs are grouped in classes a factor of two apart: within a class the order is free for the next rule.
// - Prefix families together. Within a class, lines that open with the same text (a system prompt, few-shot
//   examples, one document asked several questions) are adjacent, so they run at the same time and the engine
//   evaluates their prefix once per context and copies it (engine/pool/prefix-share.ts). The grouping is a trie order
//   over hashes of the first 64, 256 and 1,024 characters: lines sharing 64 characters sit together, and within
//   them those sharing 256, then 1,024.
// Output order never mattered (custom_id carries identity), and a resumed run skips done custom_ids whatever
// the order. Memory: a few numbers per line, never the lines (about 40 bytes each: 2 MB for 50,000 lines).
import { open } from "node:fs/promises";
import { type Endpoint, type LineOrder, type LinePreference, READS_ONLY, type RunShape } from "../openai/backend.js";
import { FAMILY_CHARS, prefixHash, promptOpening } from "../openai/prompt-opening.js";
import { type JsonlLine, readJsonlLines } from "./jsonl.js";
import { answers } from "./token-estimate.js";

/** Characters per token assumed when estimating a prompt (OpenAI's rule of thumb for English). */
const CHARS_PER_TOKEN = 4;
/** A prompt token costs about this fraction of a generated one: prompts are evaluated many tokens per step. */
const PROMPT_TOKEN_WEIGHT = 1 / 8;
/** Generated tokens assumed for a line that sets no limit (chat may then fill the context). */
const UNBOUNDED_TOKENS = 512;
const COMPLETIONS_DEFAULT_TOKENS = 16;
/** Prefix lengths (characters) hashed for the family order. */
export const FAMILY_LEVELS = [64, 256, 1024] as const;

// "interleave": families take turns, one line of each in turn, for a server whose slots each keep one family's
// prefix (upstream/slot-affinity.ts); "file": as in the file.
export type { LineOrder };

export { prefixHash };

export interface LineEstimate {
  /** Estimated work, in generated-token equivalents. */
  cost: number;
  /** The text the prompt starts with, as the family order compares it. */
  prefixText: string;
}

/** A line's work and its prompt's opening, from its body as the batch file has it (before any check). */
export function estimateLine(endpoint: Endpoint, body: unknown): LineEstimate {
  const b = (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
  const prefixText = promptOpening(b);
  const limit = firstNumber(b.max_completion_tokens, b.max_tokens, b.max_output_tokens);
  const generated = READS_ONLY.includes(endpoint)
    ? 0
    : (limit ?? (endpoint === "/v1/completions" ? COMPLETIONS_DEFAULT_TOKENS : UNBOUNDED_TOKENS)) * answers(endpoint, b);
  return { cost: generated + (prefixText.length / CHARS_PER_TOKEN) * PROMPT_TOKEN_WEIGHT, prefixText };
}

function firstNumber(...values: unknown[]): number | undefined {
  for (const v of values) if (typeof v === "number" && Number.isFinite(v) && v >= 0) return v;
  return undefined;
}

/** Cost class: a factor of two apart. */
export const costClass = (cost: number) => Math.floor(Math.log2(Math.max(1, cost)));

/** A growable column of numbers, so the index holds no object per line. */
class Column<A extends Float64Array | Uint32Array> {
  private data: A;
  length = 0;
  constructor(private readonly make: (n: number) => A) {
    this.data = make(1024);
  }
  push(v: number): void {
    if (this.length === this.data.length) {
      const bigger = this.make(this.data.length * 2);
      bigger.set(this.data);
      this.data = bigger;
    }
    this.data[this.length++] = v;
  }
  get(i: number): number {
    return this.data[i];
  }
}

/** The lines to run, as byte ranges of the file, in the order they should start. */
export interface LinePlan {
  /** Positions into the columns, in start order. */
  order: Uint32Array;
  start: (i: number) => number;
  end: (i: number) => number;
  lineNo: (i: number) => number;
}

export interface PlanInput {
  lineNo: number;
  start: number;
  end: number;
  /** Absent for a line with no body to estimate (not JSON): it fails at once, so it goes last. */
  estimate?: LineEstimate;
}

/**
 * Collects lines one at a time (keeping a few numbers each, never the text) and orders them: longest class
 * first, families together within a class, then longest first, then file order.
 */
export class OrderPlanner {
  private readonly startAt = new Column((n) => new Float64Array(n));
  private readonly endAt = new Column((n) => new Float64Array(n));
  private readonly lineNo = new Column((n) => new Uint32Array(n));
  private readonly cost = new Column((n) => new Float64Array(n));
  private readonly keys = FAMILY_LEVELS.map(() => new Column((n) => new Uint32Array(n)));

  add(line: PlanInput): void {
    this.startAt.push(line.start);
    this.endAt.push(line.end);
    this.lineNo.push(line.lineNo);
    this.cost.push(line.estimate?.cost ?? 0);
    for (const [k, level] of FAMILY_LEVELS.entries()) this.keys[k].push(line.estimate ? prefixHash(line.estimate.prefixText, level) : 0);
  }

  /** The lines, and those whose first 64 characters another line opens with too (a prefix family's). */
  shape(): RunShape {
    const first = this.keys[0];
    const seen = new Map<number, number>();
    for (let i = 0; i < first.length; i++) {
      const key = first.get(i);
      if (key !== 0) seen.set(key, (seen.get(key) ?? 0) + 1);
    }
    let familyLines = 0;
    for (const count of seen.values()) if (count > 1) familyLines += count;
    return { lines: first.length, familyLines };
  }

  /** `lanes`: for "interleave", how many families run at once (an upstream's slots); by default all of them. */
  plan(mode: Exclude<LineOrder, "file"> = "cost", lanes = Number.POSITIVE_INFINITY): LinePlan {
    const { cost, keys, lineNo } = this;
    const order = new Uint32Array(this.startAt.length);
    for (let i = 0; i < order.length; i++) order[i] = i;
    if (mode === "interleave") {
      const turn = this.turns(lanes);
      order.sort((a, b) => turn[0][a] - turn[0][b] || turn[1][a] - turn[1][b] || lineNo.get(a) - lineNo.get(b));
    } else {
      order.sort((a, b) => {
        const byClass = costClass(cost.get(b)) - costClass(cost.get(a));
        if (byClass !== 0) return byClass;
        for (const key of keys) if (key.get(a) !== key.get(b)) return key.get(a) - key.get(b);
        return cost.get(b) - cost.get(a) || lineNo.get(a) - lineNo.get(b);
      });
    }
    return { order, start: (i) => this.startAt.get(i), end: (i) => this.endAt.get(i), lineNo: (i) => lineNo.get(i) };
  }

  /**
   * For the interleaved order: each line's turn and lane. Families (familyKey's, openai/prompt-opening.ts; a
   * shorter line is a family of its own) are dealt to `lanes` lanes, the largest first (the costliest among
   * equals) to the lane with the fewest lines; within a lane its families follow one another, and the lanes take
   * turns, one line each.
   */
  private turns(lanes: number): [Uint32Array, Uint32Array] {
    const n = this.startAt.length;
    const levels = FAMILY_CHARS.map((chars) => this.keys[FAMILY_LEVELS.indexOf(chars as (typeof FAMILY_LEVELS)[number])]);
    const familyOf = new Uint32Array(n);
    const sizes: number[] = [];
    const costs: number[] = [];
    const ids = new Map<string, number>();
    for (let i = 0; i < n; i++) {
      const k = levels.findIndex((column) => column.get(i) !== 0);
      const key = k < 0 ? `line:${i}` : `${k}:${levels[k].get(i)}`;
      let id = ids.get(key);
      if (id === undefined) {
        id = sizes.push(0) - 1;
        costs.push(0);
        ids.set(key, id);
      }
      sizes[id]++;
      costs[id] += this.cost.get(i);
      familyOf[i] = id;
    }
    const laneCount = Math.max(1, Math.min(lanes, sizes.length));
    const laneLines = new Array<number>(laneCount).fill(0);
    const laneOf = new Uint32Array(sizes.length);
    const start = new Float64Array(sizes.length);
    // Largest family first (the costliest among equals, so lines that share nothing still start longest first), each
    // to the lane with the fewest lines so far; its lines start where that lane is.
    const bySize = sizes.map((_, f) => f).sort((a, b) => sizes[b] - sizes[a] || costs[b] - costs[a] || a - b);
    for (const f of bySize) {
      let lane = 0;
      for (let l = 1; l < laneCount; l++) if (laneLines[l] < laneLines[lane]) lane = l;
      laneOf[f] = lane;
      start[f] = laneLines[lane];
      laneLines[lane] += sizes[f];
    }
    const [turn, lane] = [new Uint32Array(n), new Uint32Array(n)];
    const taken = new Uint32Array(sizes.length);
    for (let i = 0; i < n; i++) {
      const f = familyOf[i];
      turn[i] = start[f] + taken[f]++;
      lane[i] = laneOf[f];
    }
    return [turn, lane];
  }
}

export type SourceLine = Pick<JsonlLine, "lineNo" | "text">;

export interface PlanOptions {
  preference?: LinePreference;
  /** Told what the run holds once it is planned; the first line waits for it to resolve. */
  onShape?: (shape: RunShape) => Promise<void>;
  /** Lines left out by their number before they are read as JSON (answered already, from the result cache). */
  skip?: (lineNo: number) => boolean;
}

/**
 * The file's non-blank lines in the planned order. `keep` says from a parsed line whether it still has to run
 * (a resumed run's done custom_ids do not); the file is read twice, the second time line by line at its offsets.
 */
export async function* plannedLines(
  path: string,
  endpoint: Endpoint,
  keep: (value: unknown) => boolean,
  { preference = { order: "cost" }, onShape, skip }: PlanOptions = {},
): AsyncGenerator<SourceLine> {
  const planner = await scan(path, endpoint, keep, skip);
  const plan = planner.plan(preference.order === "interleave" ? "interleave" : "cost", preference.lanes);
  await onShape?.(planner.shape());
  const reader = await openLines(path);
  try {
    for (const i of plan.order) {
      const start = plan.start(i);
      let text = await reader.read(start, plan.end(i) - start);
      if (text.endsWith("\r")) text = text.slice(0, -1);
      if (start === 0 && text.startsWith("\uFEFF")) text = text.slice(1);
      yield { lineNo: plan.lineNo(i), text };
    }
  } finally {
    await reader.close();
  }
}

/**
 * A file up to this size is read again whole, at once: its lines in the planned order are then slices of it, where
 * a read per line costs a round trip through libuv's pool each (a tenth of a re-run answered from the cache).
 */
const READ_WHOLE_BYTES = 32 << 20;

/** The text at a place in the file: from a copy of it in memory, or read there (a file too large to hold). */
async function openLines(path: string): Promise<{ read(start: number, length: number): Promise<string>; close(): Promise<void> }> {
  const file = await open(path, "r");
  if ((await file.stat()).size <= READ_WHOLE_BYTES) {
    const whole = await file.readFile().finally(() => file.close());
    return { read: async (start, length) => whole.toString("utf8", start, start + length), close: async () => {} };
  }
  let buffer = Buffer.alloc(64 * 1024);
  return {
    async read(start, length) {
      if (buffer.length < length) buffer = Buffer.alloc(Math.max(length, buffer.length * 2));
      const { bytesRead } = await file.read(buffer, 0, length, start);
      return buffer.toString("utf8", 0, bytesRead);
    },
    close: () => file.close(),
  };
}

async function scan(
  path: string,
  endpoint: Endpoint,
  keep: (value: unknown) => boolean,
  skip?: (lineNo: number) => boolean,
): Promise<OrderPlanner> {
  const planner = new OrderPlanner();
  for await (const line of readJsonlLines(path)) {
    if (skip?.(line.lineNo) || line.text.trim() === "") continue;
    let value: unknown;
    try {
      value = JSON.parse(line.text);
    } catch {
      planner.add({ lineNo: line.lineNo, start: line.start, end: line.end });
      continue;
    }
    if (!keep(value)) continue;
    const body = (value as { body?: unknown } | null)?.body;
    planner.add({ lineNo: line.lineNo, start: line.start, end: line.end, estimate: estimateLine(endpoint, body) });
  }
  return planner;
}
