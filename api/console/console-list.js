// @ts-check
// The home page's batch list, pools and models: rows updated in place (keyed by batch id), cards on a phone.
import { $, api, clock, duration, el, endedAt, FINAL, mb, stamp } from "./console-api.js";

/** @typedef {import("./console-api.js").Batch} Batch */

/** The list's cursors: the `after` of each page shown so far (null: the newest), and the last page's end. */
export const listState = {
  cursors: /** @type {(string | null)[]} */ ([null]),
  lastPage: { has_more: false, last_id: /** @type {string | null} */ (null) },
};
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
  if (b.paused_at) return { text: "paused" };
  const eta = b.projected_finish_at ? `ETA ${duration(Math.max(0, b.projected_finish_at - (nowSec || now)))}` : "ETA estimating…";
  return { text: `${speed} · ${eta}` };
}

/**
 * A cancelled, expired or stopped batch's failed count holds the lines it left unrun: the list cannot tell them apart.
 * @param {Batch} b
 */
const failedWord = (b) => (["cancelled", "expired", "failed"].includes(b.status) ? " failed or not run" : " failed");

/**
 * @param {Batch} b
 * @param {number} now
 */
function progressCell(b, now) {
  const { c, total, pct } = counts(b);
  const td = el("td", "progress");
  td.appendChild(meter(progressParts(b)));
  const failed = c.failed ? ` · ${c.failed}${failedWord(b)}` : "";
  // A batch that ended with lines unrun reads as its page does: what completed, then the rest; never "100%".
  const unrun = FINAL.includes(b.status) && b.status !== "completed" && c.failed > 0;
  td.appendChild(
    el(
      "div",
      "muted",
      unrun
        ? `${c.completed} completed${failed}`
        : `${c.completed + c.failed} / ${total} (${Math.floor(pct(c.completed + c.failed))}%)${failed}`,
    ),
  );
  if (b.status === "in_progress") {
    const r = rateOf(b, now);
    if (r) td.appendChild(el("div", "muted rate", r.text));
  }
  return td;
}

/**
 * @param {Batch} b
 * @param {number} now
 */
function deadlineCell(b, now) {
  const td = el("td", "deadline");
  td.title = `deadline ${stamp(b.deadline_at)} (window ${b.completion_window})`;
  // An ended batch shows the deadline it had, as its page does.
  if (FINAL.includes(b.status)) td.textContent = stamp(b.deadline_at);
  else if (b.deadline_at >= now) td.textContent = `in ${duration(b.deadline_at - now)}`;
  else td.textContent = `${duration(now - b.deadline_at)} overdue`;
  return td;
}

/**
 * Created, started and ended in one cell, a line each: three columns of their own made the table wider than a
 * 1,280 px screen.
 * @param {Batch} b
 */
function timesCell(b) {
  const td = el("td", "muted times");
  for (const [what, t] of /** @type {Array<[string, number | null | undefined]>} */ ([
    ["created", b.created_at],
    ["started", b.in_progress_at],
    ["ended", endedAt(b)],
  ]))
    td.appendChild(el("div", "", `${what} ${clock(t)}`));
  return td;
}

/** @param {Batch} b */
function slaCell(b) {
  if (b.deadline_met === true) {
    const td = el("td", "sla-met", "met");
    td.appendChild(el("span", "muted", ` · ${duration(b.deadline_at - b.completed_at)} to spare`));
    return td;
  }
  if (b.deadline_met === false) return el("td", "sla-missed", "missed");
  return el("td", "muted", FINAL.includes(b.status) ? "n/a" : "pending");
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

/**
 * @param {Batch} b
 * @param {number} now
 */
function batchRow(b, now) {
  const tr = el("tr", "batch");
  tr.dataset.id = b.id;
  tr.dataset.status = b.status;
  const id = el("td", "id");
  const link = /** @type {HTMLAnchorElement} */ (el("a", "open"));
  link.href = `#batch/${b.id}`;
  link.appendChild(el("code", "", b.id));
  id.appendChild(link);
  const sub = [b.input_filename, metadataText(b)].filter(Boolean).join(" · ");
  if (sub) id.appendChild(el("div", "muted meta", sub));
  const status = el("td", "status");
  status.appendChild(el("span", `badge ${b.status}`, b.status.replace("_", " ")));
  if (b.paused_at) status.appendChild(el("span", "badge paused", "paused"));
  const reason = b.errors?.data?.[0];
  if (b.status === "failed" && reason) {
    const text = (reason.line ? `line ${reason.line}: ` : "") + reason.message;
    status.appendChild(el("div", "muted reason wrap", text.length > 90 ? `${text.slice(0, 89)}…` : text));
  }
  /** @type {Array<[HTMLElement, string]>} */
  const cells = [
    [id, "Batch"],
    [el("td", "key-col", b.api_key_id === undefined ? "" : (b.api_key_id ?? "open API")), "Key"],
    [el("td", "model", b.model || "—"), "Model"],
    [status, "Status"],
    [progressCell(b, now), "Progress"],
    [el("td", "pool", b.pool || (b.status === "validating" ? "queued" : "—")), "Pool"],
    [deadlineCell(b, now), "Deadline"],
    [slaCell(b), "SLA"],
    [timesCell(b), "Times"],
  ];
  for (const [td, label] of cells) td.dataset.label = label;
  tr.append(...cells.map(([td]) => td));
  return tr;
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
      el("div", "muted wrap", p.jobs.length ? `running ${p.jobs.join(", ")}` : "idle"),
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
      tr.append(
        el("td", "", m.name),
        el("td", "", m.kind),
        el("td", "", m.state),
        el("td", "", m.kind === "local" ? mb(m.bytes) : "—"),
        el("td", "", m.batches),
      );
      return tr;
    }),
  );
  const select = $("f-model");
  const have = new Set([...select.options].map((o) => o.value));
  for (const m of models) if (!have.has(m.name)) select.appendChild(new Option(m.name, m.name));
  $("no-upstreams").classList.toggle("hidden", upstreams.length > 0);
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

/**
 * The rows are updated in place, keyed by batch id: a cell is replaced only when what it shows changed, and a row is
 * moved only when the order did, so a focused link and a selected id survive every poll, and the bars glide.
 * @param {Batch[]} batches
 * @param {number} now
 */
export function renderRows(batches, now) {
  const body = $("batch-rows");
  const old = new Map([...body.children].map((tr) => [tr.dataset.id, tr]));
  let prev = null;
  for (const b of batches) {
    const fresh = batchRow(b, now);
    let tr = old.get(b.id);
    if (tr) {
      old.delete(b.id);
      syncRow(tr, fresh, b);
    } else tr = fresh;
    const slot = prev ? prev.nextSibling : body.firstChild;
    if (slot !== tr) body.insertBefore(tr, slot);
    prev = tr;
  }
  for (const tr of old.values()) tr.remove();
}

/**
 * @param {HTMLElement} tr
 * @param {HTMLElement} fresh
 * @param {Batch} b
 */
function syncRow(tr, fresh, b) {
  tr.dataset.status = fresh.dataset.status;
  [...fresh.children].forEach((cell, i) => {
    const cur = tr.children[i];
    if (!cell.classList.contains("progress")) {
      if (cur.outerHTML !== cell.outerHTML) cur.replaceWith(cell);
      return;
    }
    const bar = /** @type {HTMLElement} */ (cur.querySelector(".meter"));
    const text = (/** @type {Element} */ td) => [...td.children].filter((c) => !c.classList.contains("meter"));
    if (
      text(cur)
        .map((c) => c.outerHTML)
        .join() !==
      text(cell)
        .map((c) => c.outerHTML)
        .join()
    ) {
      for (const c of text(cur)) c.remove();
      cur.append(...text(cell));
    }
    setMeter(bar, progressParts(b));
  });
}

const filtering = () => Boolean($("f-status").value || $("f-model").value || $("f-key").value || $("f-q").value.trim());

/** @param {number} rows */
export function showEmpty(rows) {
  $("empty").style.display = rows ? "none" : "";
  $("empty-none").classList.toggle("hidden", filtering());
  $("empty-filtered").classList.toggle("hidden", !filtering());
}

/** Whether this key's list spans keys (an admin's, with keys configured), by key: read once per key. @type {Map<string, boolean>} */
const spans = new Map();

/** Fills the key filter with the keys file's ids, where this key may list them (an admin's); says whether it may. */
async function keyChoices() {
  const who = sessionStorage.getItem("obi-api-key") ?? "";
  if (!spans.has(who)) {
    const keys = await api("v1/organization/api_keys", undefined, { forbiddenAsNull: true });
    const select = /** @type {HTMLSelectElement} */ ($("f-key"));
    select.replaceChildren(new Option("any", ""), ...(keys?.data ?? []).map((/** @type {any} */ k) => new Option(k.id, k.id)));
    spans.set(who, (keys?.data?.length ?? 0) > 0);
  }
  return spans.get(who) ?? false;
}

export async function refreshHome() {
  const o = await api("console/api/overview");
  document.title = `${o.service.name} · console`;
  $("model").textContent = `v${o.service.version}${o.model ? ` · model ${o.model}` : ""}`;
  $("queue-depth").textContent = `${o.queue.depth} queued`;
  $("queue-detail").textContent = `${o.queue.running} running · room for ${o.queue.max_depth - o.queue.depth} more`;
  renderPools(o.pools);
  renderModels(o.models, o.upstreams);
  renderLanes(o.lanes ?? []);
  const q = new URLSearchParams({ limit: "50" });
  if ($("f-status").value) q.set("status", $("f-status").value);
  if ($("f-model").value) q.set("model", $("f-model").value);
  if ($("f-key").value) q.set("api_key_id", $("f-key").value);
  if ($("f-q").value.trim()) q.set("q", $("f-q").value.trim());
  const after = listState.cursors[listState.cursors.length - 1];
  if (after) q.set("after", after);
  const page = await api(`console/api/batches?${q}`);
  listState.lastPage = page;
  // An admin's list spans keys: whose each batch is shows, and the key filter with it (not on an open API: no keys).
  const admin = await keyChoices();
  $("batch-table").classList.toggle("admin", admin);
  $("filters").classList.toggle("admin", admin);
  renderRows(page.data, o.now);
  showEmpty(page.data.length);
  $("batch-count").textContent = `(${page.data.length} shown)`;
  $("newer").disabled = listState.cursors.length === 1;
  $("older").disabled = !page.has_more;
  $("page-info").textContent = `page ${listState.cursors.length}`;
}
