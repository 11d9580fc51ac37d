// Stop rules: limits that end a running batch `failed` before it spends a night on a broken prompt. A batch sets
// them in its `metadata` (string values, as OpenAI's metadata holds, so its clients set them unchanged); its API
// key's entry in the keys file gives defaults for the keys the batch leaves out. Checked as the batch's committed
// counts grow; what it completed stays, and what it never ran is marked so, for `retry` to run once it is fixed.
import { InvalidRequestError } from "./errors.js";

export interface StopRules {
  /** Fraction of ended lines that may fail, once `minimumSample` lines have ended. */
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

export const hasStopRules = (r: StopRules) => r.maxErrorRate !== undefined || r.maxCost !== undefined || r.maxOutputTokens !== undefined;

/** Lines that must have ended before the error rate can stop a batch: 20, or 5% of the batch, whichever is more. */
export const minimumSample = (total: number) => Math.max(20, Math.ceil(total * 0.05));

const pct = (x: number) => `${Math.round(x * 1000) / 10}%`;
const count = (n: number) => n.toLocaleString("en-US");

/** The first rule the batch's figures break, with the message its error carries; undefined while none is broken. */
export function brokenRule(
  rules: StopRules,
  batch: { request_counts: { total: number; completed: number; failed: number }; usage: { output_tokens: number } },
  cost: { amount: number; currency: string } | null,
): { rule: StopRule; message: string } | undefined {
  const { total, completed, failed } = batch.request_counts;
  const ended = completed + failed;
  if (rules.maxErrorRate !== undefined && ended >= Math.min(total, minimumSample(total)) && ended > 0) {
    const rate = failed / ended;
    if (rate > rules.maxErrorRate)
      return {
        rule: "max_error_rate",
        message: `stopped: ${count(failed)} of ${count(ended)} lines failed (${pct(rate)}), over max_error_rate ${pct(rules.maxErrorRate)}`,
      };
  }
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
