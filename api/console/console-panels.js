// @ts-check
// The home page's panels beside the batch list: the simulated pools' cards, the models with their upstreams, and the
// synchronous lanes.
import { $, clock, duration, el, hideEmpty, keyedRows, labelledRow, mb } from "./console-api.js";
import { meter } from "./console-progress.js";

/**
 * What holds a pool's slots: the batches this key may see by id, and how many of other keys' (a key that is not an
 * admin sees only its own ids; the counts are everyone's, so a busy pool never reads as idle).
 * @param {{ in_use: number; capacity: number; preempted?: number; jobs: string[]; other_keys_jobs?: number }} p
 */
function poolJobs(p) {
  const others = p.other_keys_jobs || 0;
  const otherText = others === 1 ? "1 batch of another key" : `${others} batches of other keys`;
  if (p.jobs.length) return `running ${p.jobs.join(", ")}${others ? ` and ${otherText}` : ""}`;
  if (others) return `running ${otherText}`;
  if (p.in_use) return "busy";
  // Slots a preemption took are not idle ones: the preemption's line says what is left.
  if (p.preempted) return p.preempted < p.capacity ? "the other slots idle" : "";
  return p.capacity ? "idle" : "no slots";
}

/**
 * A preempted pool says so: how many of its slots are gone, and when they are back (the service's clock).
 * @param {{ capacity: number; preempted?: number; preempted_until?: number | null }} p
 * @param {number} now unix seconds, the server's
 */
function preemption(p, now) {
  if (!p.preempted) return null;
  const slots = `${p.preempted} of ${p.capacity} slot${p.capacity === 1 ? "" : "s"}`;
  const back = p.preempted_until ? `, back at ${clock(p.preempted_until)} (in ${duration(p.preempted_until - now)})` : "";
  return `preempted: ${slots}${back}`;
}

/**
 * @param {any[]} pools
 * @param {number} now unix seconds, the server's
 */
export function renderPools(pools, now) {
  const cards = $("cards");
  for (const p of pools) {
    let card = $(`pool-${p.name}`);
    if (!card) {
      card = el("div", "card pool");
      card.id = `pool-${p.name}`;
      cards.appendChild(card);
    }
    const preempted = preemption(p, now);
    const name = el("div", "muted", `${p.name} pool`);
    if (preempted) name.append(" ", el("span", "badge preempted", "preempted"));
    const share = (/** @type {number} */ n) => (p.capacity ? (100 * n) / p.capacity : 0);
    card.classList.toggle("preempted", Boolean(preempted));
    card.replaceChildren(
      name,
      el("div", "big", `${p.in_use} / ${p.capacity}`),
      meter([
        ["used", share(p.in_use)],
        ["preempted", share(p.preempted || 0)],
      ]),
      ...(preempted ? [el("div", "wrap preemption", preempted)] : []),
      ...[poolJobs(p)].filter(Boolean).map((text) => el("div", "muted wrap", text)),
      ...(p.workers || []).map((/** @type {any} */ w) =>
        el("div", "muted worker", `worker ${w.id}: ${w.in_use} / ${w.capacity}${w.preempted ? " (preempted)" : ""}`),
      ),
    );
  }
}

/**
 * @param {any[]} models
 * @param {any[]} upstreams
 */
export function renderModels(models, upstreams) {
  keyedRows(
    $("model-rows"),
    models,
    (m) => m.name,
    (m) => {
      const tr = labelledRow("model", [
        [el("td", "wrap name", m.name), "Model"],
        [el("td", "", m.kind), "Kind"],
        [el("td", "", m.state), "State"],
        [el("td", "", m.kind === "local" ? mb(m.bytes) : "—"), "Memory"],
        [el("td", "", m.batches), "Batches now"],
      ]);
      tr.dataset.model = m.name;
      return tr;
    },
  );
  const select = $("f-model");
  const have = new Set([...select.options].map((o) => o.value));
  for (const m of models) if (!have.has(m.name)) select.appendChild(new Option(m.name, m.name));
  $("no-upstreams").classList.toggle("hidden", upstreams.length > 0);
  hideEmpty("upstream-table", upstreams.length);
  keyedRows($("upstream-rows"), upstreams, (u) => u.model, upstreamRow);
}

/** @param {any} u */
function upstreamRow(u) {
  const errors =
    Object.entries(u.errors || {})
      .map(([k, v]) => `${k}: ${v}`)
      .join(", ") || "none";
  return labelledRow("upstream", [
    [el("td", "", u.model), "Model"],
    [el("td", "", u.limit), "Adaptive limit"],
    [el("td", "", u.in_flight), "In flight"],
    [el("td", "", u.waiting), "Waiting"],
    [el("td", "", `${u.latency_ms} ms`), "Latency"],
    [el("td", "", u.requests), "Requests"],
    [el("td", "", u.retries), "Retries"],
    [el("td", "wrap", errors), "Errors"],
  ]);
}

/**
 * The synchronous lanes: per model, the interactive lane (the default tier) and flex.
 * @param {any[]} lanes
 */
export function renderLanes(lanes) {
  $("no-lanes").classList.toggle("hidden", lanes.length > 0);
  hideEmpty("lane-table", lanes.length);
  keyedRows(
    $("lane-rows"),
    lanes,
    (l) => `${l.model} ${l.tier}`,
    (l) => {
      const tr = labelledRow("lane", [
        [el("td", "", l.model), "Model"],
        [el("td", "", l.tier === "flex" ? "flex (with the batches)" : "interactive (default)"), "Tier"],
        [el("td", "", `${l.running} / ${l.room}`), "Running / room"],
        [el("td", "", `${l.waiting} / ${l.queue_max}`), "Waiting / queue"],
        [el("td", "", l.served), "Served"],
        [el("td", "", l.refused), "Refused (429)"],
      ]);
      tr.dataset.lane = `${l.model} ${l.tier}`;
      return tr;
    },
  );
}
