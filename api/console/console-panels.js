// @ts-check
// The home page's panels beside the batch list: the simulated pools' cards, the models with their upstreams, and the
// synchronous lanes.
import { $, el, hideEmpty, mb } from "./console-api.js";
import { meter } from "./console-progress.js";

/**
 * What holds a pool's slots: the batches this key may see by id, and how many of other keys' (a key that is not an
 * admin sees only its own ids; the counts are everyone's, so a busy pool never reads as idle).
 * @param {{ in_use: number; capacity: number; jobs: string[]; other_keys_jobs?: number }} p
 */
function poolJobs(p) {
  const others = p.other_keys_jobs || 0;
  const otherText = others === 1 ? "1 batch of another key" : `${others} batches of other keys`;
  if (p.jobs.length) return `running ${p.jobs.join(", ")}${others ? ` and ${otherText}` : ""}`;
  if (others) return `running ${otherText}`;
  return p.in_use ? "busy" : p.capacity ? "idle" : "no slots";
}

/** @param {any[]} pools */
export function renderPools(pools) {
  const cards = $("cards");
  for (const p of pools) {
    let card = $(`pool-${p.name}`);
    if (!card) {
      card = el("div", "card pool");
      card.id = `pool-${p.name}`;
      cards.appendChild(card);
    }
    card.replaceChildren(
      el("div", "muted", `${p.name} pool`),
      el("div", "big", `${p.in_use} / ${p.capacity}`),
      meter([["used", p.capacity ? (100 * p.in_use) / p.capacity : 0]]),
      el("div", "muted wrap", poolJobs(p)),
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
  $("model-rows").replaceChildren(
    ...models.map((/** @type {any} */ m) => {
      const tr = el("tr", "model");
      tr.dataset.model = m.name;
      /** @type {Array<[HTMLElement, string]>} */
      const cells = [
        [el("td", "wrap name", m.name), "Model"],
        [el("td", "", m.kind), "Kind"],
        [el("td", "", m.state), "State"],
        [el("td", "", m.kind === "local" ? mb(m.bytes) : "—"), "Memory"],
        [el("td", "", m.batches), "Batches now"],
      ];
      // On a phone each model is a card of labelled fields, as a batch is: a long name wraps instead of overflowing.
      for (const [td, label] of cells) td.dataset.label = label;
      tr.append(...cells.map(([td]) => td));
      return tr;
    }),
  );
  const select = $("f-model");
  const have = new Set([...select.options].map((o) => o.value));
  for (const m of models) if (!have.has(m.name)) select.appendChild(new Option(m.name, m.name));
  $("no-upstreams").classList.toggle("hidden", upstreams.length > 0);
  hideEmpty("upstream-table", upstreams.length);
  $("upstream-rows").replaceChildren(
    ...upstreams.map((/** @type {any} */ u) => {
      const tr = el("tr", "upstream");
      const errors =
        Object.entries(u.errors || {})
          .map(([k, v]) => `${k}: ${v}`)
          .join(", ") || "none";
      /** @type {Array<[HTMLElement, string]>} */
      const cells = [
        [el("td", "", u.model), "Model"],
        [el("td", "", u.limit), "Adaptive limit"],
        [el("td", "", u.in_flight), "In flight"],
        [el("td", "", u.waiting), "Waiting"],
        [el("td", "", `${u.latency_ms} ms`), "Latency"],
        [el("td", "", u.requests), "Requests"],
        [el("td", "", u.retries), "Retries"],
        [el("td", "wrap", errors), "Errors"],
      ];
      // On a phone each upstream is a card of labelled fields, as a batch is.
      for (const [td, label] of cells) td.dataset.label = label;
      tr.append(...cells.map(([td]) => td));
      return tr;
    }),
  );
}

/**
 * The synchronous lanes: per model, the interactive lane (the default tier) and flex.
 * @param {any[]} lanes
 */
export function renderLanes(lanes) {
  $("no-lanes").classList.toggle("hidden", lanes.length > 0);
  hideEmpty("lane-table", lanes.length);
  $("lane-rows").replaceChildren(
    ...lanes.map((/** @type {any} */ l) => {
      const tr = el("tr", "lane");
      tr.dataset.lane = `${l.model} ${l.tier}`;
      /** @type {Array<[HTMLElement, string]>} */
      const cells = [
        [el("td", "", l.model), "Model"],
        [el("td", "", l.tier === "flex" ? "flex (with the batches)" : "interactive (default)"), "Tier"],
        [el("td", "", `${l.running} / ${l.room}`), "Running / room"],
        [el("td", "", `${l.waiting} / ${l.queue_max}`), "Waiting / queue"],
        [el("td", "", l.served), "Served"],
        [el("td", "", l.refused), "Refused (429)"],
      ];
      for (const [td, label] of cells) td.dataset.label = label;
      tr.append(...cells.map(([td]) => td));
      return tr;
    }),
  );
}
