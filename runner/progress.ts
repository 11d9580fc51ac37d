// Progress of an offline run on stderr: a redrawn bar with rate and ETA on a terminal, a plain line
// every few seconds otherwise (CI logs, files), and one final line either way.
import type { Progress } from "../pipeline/types.js";

export interface ProgressStream {
  write(text: string): unknown;
  isTTY?: boolean;
}

export interface ProgressOptions {
  total: number;
  stream: ProgressStream;
  /** Default: stream.isTTY. */
  tty?: boolean;
  /** Plain mode: a line at most this often. */
  intervalMs?: number;
  /** Milliseconds. */
  now?: () => number;
  /** An earlier run's results this run resumes after: counted as done, but not in this run's rates and ETA. */
  base?: Base;
  /**
   * Which tokens the rate counts: the completion tokens, or the prompt tokens where the requests generate none
   * (embeddings, rerank, score), whose completion rate would always be 0.
   */
  tokens?: TokenKind;
}

export type TokenKind = "completion" | "prompt";
type Base = { done: number; completionTokens: number; promptTokens?: number };

export interface ProgressReporter {
  update(p: Progress): void;
  /** Draws the last state and ends the bar's line; returns the rates it drew, for the summary to repeat. */
  finish(p: Progress): RunRates;
}

/** This run's own work: its seconds, and its requests and tokens (completion, or prompt: ProgressOptions.tokens) per second. */
export interface RunRates {
  seconds: number;
  requestsPerSecond: number;
  tokensPerSecond: number;
}

/** A redraw per request would flood a terminal with writes on fast models. */
const TTY_REDRAW_MS = 100;
const DEFAULT_PLAIN_INTERVAL_MS = 10_000;
const BAR_WIDTH = 30;

export function createProgressReporter(opts: ProgressOptions): ProgressReporter {
  const now = opts.now ?? Date.now;
  const tty = opts.tty ?? !!opts.stream.isTTY;
  const every = tty ? TTY_REDRAW_MS : (opts.intervalMs ?? DEFAULT_PLAIN_INTERVAL_MS);
  const started = now();
  let last = started;
  let drawn = "";

  const base = opts.base ?? { done: 0, completionTokens: 0 };
  const tokens = opts.tokens ?? "completion";
  const draw = (p: Progress, final: boolean) => {
    const seconds = (now() - started) / 1000;
    const line = describe(p, opts.total, seconds, base, tokens);
    if (tty) opts.stream.write(`\r\x1b[K${bar(p, opts.total)} ${line}${final ? "\n" : ""}`);
    else if (line !== drawn) opts.stream.write(`progress: ${line}\n`);
    drawn = line;
    return { seconds, ...rates(p, seconds, base, tokens) };
  };

  return {
    update(p) {
      const t = now();
      if (t - last < every) return;
      last = t;
      draw(p, false);
    },
    finish(p) {
      return draw(p, true);
    },
  };
}

function bar(p: Progress, total: number): string {
  const filled = total > 0 ? Math.round((BAR_WIDTH * Math.min(total, p.completed + p.failed)) / total) : BAR_WIDTH;
  return `[${"#".repeat(filled)}${"-".repeat(BAR_WIDTH - filled)}]`;
}

function rates(p: Progress, seconds: number, base: Base, tokens: TokenKind) {
  const ran = p.completed + p.failed - base.done;
  const counted = tokens === "prompt" ? p.usage.promptTokens - (base.promptTokens ?? 0) : p.usage.completionTokens - base.completionTokens;
  return {
    requestsPerSecond: seconds > 0 ? Math.max(0, ran) / seconds : 0,
    tokensPerSecond: seconds > 0 ? Math.max(0, counted) / seconds : 0,
  };
}

/** "42/100 (42%) 3.1 req/s 210 tok/s ETA 19s, 2 failed": rates and ETA of this run's work, not of what it resumed after. */
export function describe(
  p: Progress,
  total: number,
  elapsedSeconds: number,
  base: Base = { done: 0, completionTokens: 0 },
  kind: TokenKind = "completion",
): string {
  const done = p.completed + p.failed;
  const pct = total > 0 ? Math.floor((100 * done) / total) : 100;
  const { requestsPerSecond: rate, tokensPerSecond: tokens } = rates(p, elapsedSeconds, base, kind);
  const eta = done >= total ? "done" : rate > 0 ? `ETA ${formatDuration((total - done) / rate)}` : "ETA ?";
  const failed = p.failed > 0 ? `, ${p.failed} failed` : "";
  return `${done}/${total} (${pct}%) ${rate.toFixed(1)} req/s ${Math.round(tokens)} ${tokenUnit(kind)} ${eta}${failed}`;
}

/** How a rate of `kind` tokens is written: "tok/s" for completion tokens, as it always was. */
export function tokenUnit(kind: TokenKind): string {
  return kind === "prompt" ? "prompt tok/s" : "tok/s";
}

export function formatDuration(seconds: number): string {
  if (seconds < 10) return `${Math.max(0, seconds).toFixed(1)}s`;
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}
