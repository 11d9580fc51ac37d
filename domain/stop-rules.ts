// Stop rules: limits that end a running batch `failed` before it spends a night on a broken prompt. A batch sets
// them in its `metadata` (string values, as OpenAI's metadata holds, so its clients set them unchanged); its API
// key's entry in the keys file gives defaults for the keys the batch leaves out. Checked as the batch's figures
// grow; what it completed stays, and what it never ran is marked so, for `retry` to run once it is fixed.
// The error rate is judged on a sample that represents the batch. A line refused before it runs (a prompt too long
// for the context) ends at once, and the costliest lines (the longest prompts) start first: refusals that come
// before any line has run to its end are counted for what they are for certain, failed lines among all the lines
// the runs look at. From then on lines are looked at at the pace of those that run, so the refusals among them and
// the failures of the lines that ran are the sample, judged once it holds the minimum sample's lines.
import type { LineSample } from "../pipeline/types.js";
import { InvalidRequestError } from "./errors.js";

export interface StopRules {
  /** Fraction of the batch's lines that may fail, judged on a sample of at least `minimumSample` lines. */
  maxErrorRate?: number;
  /** In the currency of the batch's model's price (the models file). */
  maxCost?: number;
  /** Output tokens of the whole batch. */
  maxOutputTokens?: number;
}

export type StopRule = "max_error_rate" | "max_cost" | "max_output_tokens";
export const STOP_RULES: readonly StopRule[] = ["max_error_rate", "max_cost", "max_output_tokens"];

const NUMBER = /^\s*(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\s*$/;

function parse(rule: StopRule, raw: string): number {
  const v = NUMBER.test(raw) ? Number(raw) : Number.NaN;
  const param = `metadata.${rule}`;
  const bad = (what: string) =>
    new InvalidRequestError(`Invalid '${param}': ${JSON.stringify(raw)} is not ${what}.`, "invalid_metadata", param);
  if (rule === "max_error_rate") {
    if (!(v > 0 && v <= 1)) throw bad('a fraction above 0 and at most 1 (such as "0.2" for 20%)');
  } else if (rule === "max_output_tokens") {
    if (!(Number.isSafeInteger(v) && v >= 1)) throw bad("a whole number of tokens, at least 1");
  } else if (!(v > 0 && Number.isFinite(v))) throw bad("an amount above 0, in the currency of the model's price");
  return v;
}

/** The batch's rules: its metadata's, else its key's defaults. Throws naming the metadata key that is not a valid limit. */
export function stopRulesOf(metadata: Readonly<Record<string, string>> | null | undefined, defaults: StopRules = {}): StopRules {
  const m = metadata ?? {};
  const rules: StopRules = { ...defaults };
  if (m.max_error_rate !== undefined) rules.maxErrorRate = parse("max_error_rate", m.max_error_rate);
  if (m.max_cost !== undefined) rules.maxCost = parse("max_cost", m.max_cost);
  if (m.max_output_tokens !== undefined) rules.maxOutputTokens = parse("max_output_tokens", m.max_output_tokens);
  return rules;
}

/** The lines a batch's runs here look at (`lines`: those they had left to run as they started), and how those looked at so far went. */
export interface ErrorSample extends LineSample {
  lines: number;
}

export const hasStopRules = (r: StopRules) => r.maxErrorRate !== undefined || r.maxCost !== undefined || r.maxOutputTokens !== undefined;

/** Lines that must have ended before the error rate can stop a batch: 20, or 5% of the batch, whichever is more. */
export const minimumSample = (total: number) => Math.max(20, Math.ceil(total * 0.05));

const pct = (x: number) => `${Math.round(x * 1000) / 10}%`;
const count = (n: number) => n.toLocaleString("en-US");

/**
 * The first rule the batch's figures break, with the message its error carries; undefined while none is broken.
 * The error rate is judged on `sample` (the lines its runs here have looked at), none without it.
 */
export function brokenRule(
  rules: StopRules,
  batch: { request_counts: { total: number }; usage: { output_tokens: number } },
  cost: { amount: number; currency: string } | null,
  sample?: ErrorSample,
): { rule: StopRule; message: string } | undefined {
  const failing =
    rules.maxErrorRate !== undefined && sample ? errorRate(rules.maxErrorRate, batch.request_counts.total, sample) : undefined;
  if (failing) return { rule: "max_error_rate", message: failing };
  if (rules.maxCost !== undefined && cost && cost.amount > rules.maxCost)
    return {
      rule: "max_cost",
      message: `stopped: the batch cost ${cost.amount} ${cost.currency}, over max_cost ${rules.maxCost} ${cost.currency}`,
    };
  const tokens = batch.usage.output_tokens;
  if (rules.maxOutputTokens !== undefined && tokens > rules.maxOutputTokens)
    return {
      rule: "max_output_tokens",
      message: `stopped: ${count(tokens)} output tokens, over max_output_tokens ${count(rules.maxOutputTokens)}`,
    };
  return undefined;
}

/**
 * The message of an error rate over `max`. The early refusals are a share of the lines here that fails whatever
 * runs; of the rest, the refusals' share of the lines looked at since, then of those that ran, the share that
 * failed. The run lines are judged once they stand for the minimum sample together with the refusals beside them
 * (20 ended, with an eighth of the lines refused, stand for 20 / (7/8)).
 */
function errorRate(max: number, total: number, s: ErrorSample): string | undefined {
  const minimum = Math.min(total, minimumSample(total));
  const lines = Math.max(s.lines, s.early + s.refused + s.begun, 1);
  const early = s.early / lines;
  const over = `over max_error_rate ${pct(max)}`;
  if (early > max) return `stopped: ${count(s.early)} of ${count(lines)} lines were refused before they ran (${pct(early)}), ${over}`;
  const looked = s.refused + s.begun;
  if (looked < minimum) return undefined;
  const refused = s.refused / looked;
  const judged = s.ended > 0 && refused < 1 && s.ended / (1 - refused) >= minimum;
  const rate = early + (1 - early) * (refused + (judged ? ((1 - refused) * s.failed) / s.ended : 0));
  if (rate <= max) return undefined;
  const refusals = s.early + s.refused;
  if (refusals === 0) return `stopped: ${count(s.failed)} of ${count(s.ended)} lines failed (${pct(rate)}), ${over}`;
  return (
    `stopped: ${pct(rate)} of lines fail (${count(s.failed)} of ${count(s.ended)} that ran failed; ` +
    `${count(refusals)} of ${count(s.early + looked)} were refused before they ran), ${over}`
  );
}
