// @ts-check
// The usage view for admin keys: each key's requests, tokens and cost over the last 30 days, read from the
// organization usage and costs APIs (the same figures FinOps tools read), and what it has enqueued against its
// limits now. Hidden for a key that is not an admin's (those APIs answer 403).
import { $, api, el, keyedRows, labelledRow } from "./console-api.js";

const DAYS = 30;

/** @param {string} path the JSON of a GET, or null where this key may not read it (403) */
const adminGet = (path) => api(path, undefined, { forbiddenAsNull: true });

/**
 * Sums a page's results per api_key_id.
 * @param {any} page
 * @param {(r: any) => Record<string, number>} pick
 */
function byKey(page, pick) {
  /** @type {Map<string, Record<string, number>>} */
  const out = new Map();
  for (const bucket of page.data)
    for (const r of bucket.results) {
      const sum = out.get(r.api_key_id ?? "—") ?? {};
      for (const [k, v] of Object.entries(pick(r))) sum[k] = (sum[k] ?? 0) + v;
      out.set(r.api_key_id ?? "—", sum);
    }
  return out;
}

/** @param {number} n */
const num = (n) => (n ?? 0).toLocaleString();

/**
 * A key's cost in each currency it spent in ("0.0123 USD + 0.0040 EUR"); 0 where nothing priced ran.
 * @param {Record<string, number> | undefined} byCurrency
 */
const costText = (byCurrency) =>
  Object.entries(byCurrency ?? {})
    .map(([currency, amount]) => `${amount.toFixed(4)} ${currency.toUpperCase()}`)
    .join(" + ") || (0).toFixed(4);

/**
 * Each model's enqueued tokens against its limit. `*` is not a model: it is the limit of each model the keys file
 * does not name, so a model under it reads against it, and it is said once for the models with nothing enqueued.
 * @param {Record<string, number>} tokens
 * @param {Record<string, number>} limits
 */
function enqueuedText(tokens, limits) {
  const star = limits["*"];
  const models = new Set([...Object.keys(tokens), ...Object.keys(limits)].filter((m) => m !== "*"));
  const limitOf = (/** @type {string} */ m) => limits[m] ?? star;
  const parts = [...models].map((m) => `${m}: ${num(tokens[m] ?? 0)}${limitOf(m) ? ` / ${num(limitOf(m))}` : ""}`);
  if (star) parts.push(`${models.size ? "any other model" : "any model"}: up to ${num(star)} each`);
  return parts.join(", ") || "—";
}

export async function refreshUsage() {
  const keys = await adminGet("v1/organization/api_keys");
  $("usage").classList.toggle("hidden", !keys);
  if (!keys) return;
  const since = Math.floor(Date.now() / 1000 / 86400) * 86400 - (DAYS - 1) * 86400;
  const q = `start_time=${since}&bucket_width=1d&limit=${DAYS}&group_by=api_key_id`;
  const [usage, costs] = await Promise.all([adminGet(`v1/organization/usage/completions?${q}`), adminGet(`v1/organization/costs?${q}`)]);
  const used = byKey(usage, (r) => ({
    requests: r.num_model_requests,
    input: r.input_tokens,
    cached: r.input_cached_tokens,
    output: r.output_tokens,
  }));
  // By currency: the costs API answers a result per currency, never one sum of two.
  const spent = byKey(costs, (r) => ({ [r.amount.currency]: r.amount.value }));
  // What ran with no key (the API open: no keys configured, or before there were any) is its own row.
  const open = used.has("—") || spent.has("—") || keys.data.length === 0;
  const rows = [
    ...keys.data,
    ...(open ? [{ id: "—", name: "open API (no key)", weight: "—", enqueued_tokens: {}, enqueued_token_limits: {} }] : []),
  ];
  keyedRows(
    $("usage-rows"),
    rows,
    (k) => k.id,
    (k) => {
      const u = used.get(k.id) ?? {};
      const tr = labelledRow("usage", [
        [el("td", "", k.name ?? (k.admin ? `${k.id} (admin)` : k.id)), "Key"],
        [el("td", "", k.weight), "Share"],
        [el("td", "", enqueuedText(k.enqueued_tokens, k.enqueued_token_limits)), "Enqueued / limit"],
        [el("td", "num", num(u.requests)), "Requests"],
        [el("td", "num", num(u.input)), "Input tokens"],
        [el("td", "num", num(u.cached)), "Cached"],
        [el("td", "num", num(u.output)), "Output tokens"],
        [el("td", "num", costText(spent.get(k.id))), "Cost"],
      ]);
      tr.dataset.key = k.id;
      return tr;
    },
  );
}
