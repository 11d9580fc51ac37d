// @ts-check
// A batch's progress as the list and its page both show it: the bar (done, failed, not run), tokens/s measured here
// and the ETA the API projects, its cost and its metadata as text.
import { duration, el, FINAL } from "./console-api.js";

/** @typedef {import("./console-api.js").Batch} Batch */

/** Per running batch, its counts a few seconds ago: tokens/s comes from the difference. */
const rates = new Map();

/** @param {Array<[string, number]>} parts the bar's parts: class and percent */
export function meter(parts) {
  const m = el("div", "meter");
  for (const [cls, pct] of parts) {
    const s = el("span", cls);
    s.style.width = `${Math.max(0, Math.min(100, pct))}%`;
    m.appendChild(s);
  }
  return m;
}

/**
 * Updates a meter's widths in place, so the bar glides (CSS transition) instead of jumping.
 * @param {HTMLElement} m
 * @param {Array<[string, number]>} parts
 */
export function setMeter(m, parts) {
  if (m.children.length !== parts.length) m.replaceChildren(...parts.map(([cls]) => el("span", cls)));
  parts.forEach(([, pct], i) => {
    /** @type {HTMLElement} */ (m.children[i]).style.width = `${Math.max(0, Math.min(100, pct))}%`;
  });
}

/**
 * Whether the batch is paused now: a batch that has ended or is ending is not, whatever its record kept.
 * @param {Batch} b
 */
export const pausedNow = (b) => Boolean(b.paused_at) && !FINAL.includes(b.status) && b.status !== "cancelling" && b.status !== "finalizing";

/** @param {Batch} b */
export function counts(b) {
  const c = b.request_counts || { completed: 0, failed: 0, total: 0 };
  const total = c.total || 0;
  const pct = (/** @type {number} */ n) => (total ? (100 * n) / total : 0);
  return { c, total, pct };
}

/**
 * A batch's bar: completed, failed, then not run (grey). `n` splits the failed count where the batch's page knows it;
 * in the list a cancelled or expired batch's failed share is mostly lines it never ran, so it is grey there.
 * @param {Batch} b
 * @param {{ failed: number; not_run: number }} [n]
 * @returns {Array<[string, number]>}
 */
export const progressParts = (b, n) => {
  const { c, pct } = counts(b);
  if (n)
    return [
      ["done", pct(c.completed)],
      ["failed", pct(n.failed)],
      ["notrun", pct(n.not_run)],
    ];
  const unrun = b.status === "cancelled" || b.status === "expired";
  return [
    ["done", pct(c.completed)],
    [unrun ? "notrun" : "failed", pct(c.failed)],
  ];
};

/**
 * A batch refused before any request ran, said as such (its counts are all 0, as OpenAI reports them): its input
 * file's problems at validation, or a reason of the batch as a whole (an enqueued-token limit). Null otherwise.
 * @param {Batch} b
 */
export function refusal(b) {
  if (b.status !== "failed" || b.in_progress_at) return null;
  const problems = (b.errors?.data || []).filter((/** @type {{ line?: number | null }} */ e) => e.line);
  return problems.length
    ? `Refused at validation: no request ran · ${problems.length} problem${problems.length > 1 ? "s" : ""} in the input file`
    : "Refused before it ran: no request ran";
}

/**
 * A running batch's tokens/s, measured here from its counts now and a few seconds ago, and its ETA: the API's
 * projected_finish_at, the service's one estimate (the SLA alert's too), which says nothing until it has a sample.
 * @param {Batch} b
 * @param {number} [nowSec] the server's clock, unix seconds
 */
export function rateOf(b, nowSec) {
  const now = Date.now() / 1000;
  const { c } = counts(b);
  const done = c.completed + c.failed;
  const tokens = b.usage?.output_tokens || 0;
  let prev = rates.get(b.id);
  if (!prev || done < prev.done) {
    prev = { t: now, done, tokens, tps: 0 };
    rates.set(b.id, prev);
  }
  const dt = now - prev.t;
  if (dt >= 2) {
    const a = 0.5;
    prev.tps = prev.tps ? a * ((tokens - prev.tokens) / dt) + (1 - a) * prev.tps : (tokens - prev.tokens) / dt;
    Object.assign(prev, { t: now, done, tokens });
  }
  const speed = prev.tps ? `${Math.round(prev.tps)} tok/s` : "measuring…";
  if (pausedNow(b)) return { text: "paused" };
  const eta = b.projected_finish_at ? `ETA ${duration(Math.max(0, b.projected_finish_at - (nowSec || now)))}` : "ETA estimating…";
  return { text: `${speed} · ${eta}` };
}

/**
 * "0.0123 USD (spot 0.0023 · dedicated 0.01)"; null without a price in the models file.
 * @param {{ amount: number; currency: string; basis: string; spot: number; dedicated: number } | null | undefined} cost
 */
export function costText(cost) {
  if (!cost) return null;
  const split = cost.basis === "pool_hours" ? ` (spot ${cost.spot} · dedicated ${cost.dedicated})` : " (by tokens)";
  return `${cost.amount} ${cost.currency}${split}`;
}

/** @param {Batch} b */
export function metadataText(b) {
  return Object.entries(b.metadata || {})
    .map(([k, v]) => `${k}=${v}`)
    .join(" · ");
}
