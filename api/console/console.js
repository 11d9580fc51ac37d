"use strict";
// The console: polls the service's JSON (relative URLs, so it works behind a path prefix) and updates the page in
// place. Everything from the server is set with textContent, never parsed as HTML. No build step, no framework.
const POLL_MS = 1000;
const SERIES_MS = 5000;
const FINAL = ["completed", "failed", "expired", "cancelled"];
const STATUSES = ["validating", "in_progress", "finalizing", "completed", "failed", "expired", "cancelling", "cancelled"];
const $ = (id) => document.getElementById(id);
let apiKey = sessionStorage.getItem("obi-api-key") || "";
/** The list's cursors: the `after` of each page shown so far (null: the newest). */
let cursors = [null];
let lastPage = { has_more: false, last_id: null };
/** Per running batch, the last two samples of its counts: tokens/s and an ETA come from their difference. */
const rates = new Map();

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

function duration(s) {
  s = Math.abs(Math.round(s));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
  if (s < 2 * 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
  return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
}
const stamp = (unix) => (unix ? new Date(unix * 1000).toLocaleString() : "—");
const clock = (unix) => (unix ? new Date(unix * 1000).toLocaleTimeString() : "—");
const endedAt = (b) => b.completed_at || b.failed_at || b.expired_at || b.cancelled_at || null;
const mb = (bytes) => (bytes ? Math.round(bytes / 2 ** 20) + " MB" : "—");

async function api(path, init) {
  const headers = Object.assign({}, init && init.headers, apiKey ? { Authorization: "Bearer " + apiKey } : {});
  const res = await fetch(path, Object.assign({ cache: "no-store" }, init, { headers }));
  if (res.status === 401) {
    $("keyform").className = "card show";
    $("empty").style.display = "none";
    throw new Error(apiKey ? "That API key was not accepted." : "This service needs an API key.");
  }
  $("keyform").className = "card";
  const body = res.headers.get("content-type")?.includes("json") ? await res.json() : null;
  if (!res.ok) throw new Error((body && body.error && body.error.message) || path + " answered HTTP " + res.status);
  return body;
}

function meter(parts) {
  const m = el("div", "meter");
  for (const [cls, pct] of parts) {
    const s = el("span", cls);
    s.style.width = Math.max(0, Math.min(100, pct)) + "%";
    m.appendChild(s);
  }
  return m;
}

/** Updates a meter's widths in place, so the bar glides (CSS transition) instead of jumping. */
function setMeter(m, parts) {
  if (m.children.length !== parts.length) m.replaceChildren(...parts.map(([cls]) => el("span", cls)));
  parts.forEach(([, pct], i) => {
    m.children[i].style.width = Math.max(0, Math.min(100, pct)) + "%";
  });
}

function counts(b) {
  const c = b.request_counts || { completed: 0, failed: 0, total: 0 };
  const total = c.total || 0;
  const pct = (n) => (total ? (100 * n) / total : 0);
  return { c, total, pct };
}

/**
 * A batch's bar: completed, failed, then not run (grey). `n` splits the failed count where the batch's page knows it;
 * in the list a cancelled or expired batch's failed share is mostly lines it never ran, so it is grey there.
 */
const progressParts = (b, n) => {
  const { c, pct } = counts(b);
  if (n) return [["done", pct(c.completed)], ["failed", pct(n.failed)], ["notrun", pct(n.not_run)]];
  const unrun = b.status === "cancelled" || b.status === "expired";
  return [["done", pct(c.completed)], [unrun ? "notrun" : "failed", pct(c.failed)]];
};

/**
 * A running batch's tokens/s, measured here from its counts now and a few seconds ago, and its ETA: the API's
 * projected_finish_at, the service's one estimate (the SLA alert's too), which says nothing until it has a sample.
 */
function rateOf(b, nowSec) {
  const now = Date.now() / 1000;
  const { c } = counts(b);
  const done = c.completed + c.failed;
  const tokens = (b.usage && b.usage.output_tokens) || 0;
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
  const speed = prev.tps ? Math.round(prev.tps) + " tok/s" : "measuring…";
  const eta = b.projected_finish_at ? "ETA " + duration(Math.max(0, b.projected_finish_at - (nowSec || now))) : "ETA estimating…";
  return { text: speed + " · " + eta };
}

/** A cancelled or expired batch's failed count holds the lines it left unrun: the list cannot tell them apart. */
const failedWord = (b) => (b.status === "cancelled" || b.status === "expired" ? " failed or not run" : " failed");

function progressCell(b, now) {
  const { c, total, pct } = counts(b);
  const td = el("td", "progress");
  td.appendChild(meter(progressParts(b)));
  const failed = c.failed ? " · " + c.failed + failedWord(b) : "";
  td.appendChild(el("div", "muted", c.completed + c.failed + " / " + total + " (" + Math.floor(pct(c.completed + c.failed)) + "%)" + failed));
  if (b.status === "in_progress") {
    const r = rateOf(b, now);
    if (r) td.appendChild(el("div", "muted rate", r.text));
  }
  return td;
}

function deadlineCell(b, now) {
  const td = el("td", "deadline");
  td.title = "deadline " + stamp(b.deadline_at) + " (window " + b.completion_window + ")";
  if (b.status === "failed" || b.status === "cancelled") td.textContent = "—";
  else if (FINAL.includes(b.status)) td.textContent = stamp(b.deadline_at);
  else if (b.deadline_at >= now) td.textContent = "in " + duration(b.deadline_at - now);
  else td.textContent = duration(now - b.deadline_at) + " overdue";
  return td;
}

function slaCell(b) {
  if (b.deadline_met === true) {
    const td = el("td", "sla-met", "met");
    td.appendChild(el("span", "muted", " · " + duration(b.deadline_at - b.completed_at) + " to spare"));
    return td;
  }
  if (b.deadline_met === false) return el("td", "sla-missed", "missed");
  return el("td", "muted", FINAL.includes(b.status) ? "n/a" : "pending");
}

/** "0.0123 USD (spot 0.0023 · dedicated 0.01)"; null without a price in the models file. */
function costText(cost) {
  if (!cost) return null;
  const split = cost.basis === "pool_hours" ? " (spot " + cost.spot + " · dedicated " + cost.dedicated + ")" : " (by tokens)";
  return cost.amount + " " + cost.currency + split;
}

function metadataText(b) {
  return Object.entries(b.metadata || {})
    .map(([k, v]) => k + "=" + v)
    .join(" · ");
}

function batchRow(b, now) {
  const tr = el("tr", "batch");
  tr.dataset.id = b.id;
  tr.dataset.status = b.status;
  const id = el("td", "id");
  const link = el("a", "open");
  link.href = "#batch/" + b.id;
  link.appendChild(el("code", "", b.id));
  id.appendChild(link);
  const sub = [b.input_filename, metadataText(b)].filter(Boolean).join(" · ");
  if (sub) id.appendChild(el("div", "muted meta", sub));
  const status = el("td", "status");
  status.appendChild(el("span", "badge " + b.status, b.status.replace("_", " ")));
  const reason = b.errors && b.errors.data && b.errors.data[0];
  if (b.status === "failed" && reason) {
    const text = (reason.line ? "line " + reason.line + ": " : "") + reason.message;
    status.appendChild(el("div", "muted reason wrap", text.length > 90 ? text.slice(0, 89) + "…" : text));
  }
  const cells = [
    [id, "Batch"],
    [el("td", "model", b.model || "—"), "Model"],
    [status, "Status"],
    [progressCell(b, now), "Progress"],
    [el("td", "pool", b.pool || (b.status === "validating" ? "queued" : "—")), "Pool"],
    [deadlineCell(b, now), "Deadline"],
    [slaCell(b), "SLA"],
    [el("td", "muted", clock(b.created_at)), "Created"],
    [el("td", "muted", clock(b.in_progress_at)), "Started"],
    [el("td", "muted", clock(endedAt(b))), "Ended"],
  ];
  for (const [td, label] of cells) td.dataset.label = label;
  tr.append(...cells.map(([td]) => td));
  return tr;
}

function renderPools(pools) {
  const cards = $("cards");
  for (const p of pools) {
    let card = $("pool-" + p.name);
    if (!card) {
      card = el("div", "card pool");
      card.id = "pool-" + p.name;
      cards.appendChild(card);
    }
    card.replaceChildren(
      el("div", "muted", p.name + " pool"),
      el("div", "big", p.in_use + " / " + p.capacity),
      meter([["used", p.capacity ? (100 * p.in_use) / p.capacity : 0]]),
      el("div", "muted wrap", p.jobs.length ? "running " + p.jobs.join(", ") : "idle"),
      ...(p.workers || []).map((w) =>
        el("div", "muted worker", "worker " + w.id + ": " + w.in_use + " / " + w.capacity + (w.preempted ? " (preempted)" : "")),
      ),
    );
  }
}

function renderModels(models, upstreams) {
  $("model-rows").replaceChildren(
    ...models.map((m) => {
      const tr = el("tr", "model");
      tr.dataset.model = m.name;
      tr.append(el("td", "", m.name), el("td", "", m.kind), el("td", "", m.state), el("td", "", m.kind === "local" ? mb(m.bytes) : "—"), el("td", "", m.batches));
      return tr;
    }),
  );
  const select = $("f-model");
  const have = new Set([...select.options].map((o) => o.value));
  for (const m of models) if (!have.has(m.name)) select.appendChild(new Option(m.name, m.name));
  $("no-upstreams").classList.toggle("hidden", upstreams.length > 0);
  $("upstream-rows").replaceChildren(
    ...upstreams.map((u) => {
      const tr = el("tr", "upstream");
      const errors = Object.entries(u.errors || {}).map(([k, v]) => k + ": " + v).join(", ") || "none";
      tr.append(el("td", "", u.model), el("td", "", u.limit), el("td", "", u.in_flight), el("td", "", u.waiting), el("td", "", u.latency_ms + " ms"), el("td", "", u.requests), el("td", "", u.retries), el("td", "wrap", errors));
      return tr;
    }),
  );
}

/**
 * The rows are updated in place, keyed by batch id: a cell is replaced only when what it shows changed, and a row is
 * moved only when the order did, so a focused link and a selected id survive every poll, and the bars glide.
 */
function renderRows(batches, now) {
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

function syncRow(tr, fresh, b) {
  tr.dataset.status = fresh.dataset.status;
  [...fresh.children].forEach((cell, i) => {
    const cur = tr.children[i];
    if (!cell.classList.contains("progress")) {
      if (cur.outerHTML !== cell.outerHTML) cur.replaceWith(cell);
      return;
    }
    const bar = cur.querySelector(".meter");
    const text = (td) => [...td.children].filter((c) => !c.classList.contains("meter"));
    if (text(cur).map((c) => c.outerHTML).join() !== text(cell).map((c) => c.outerHTML).join()) {
      for (const c of text(cur)) c.remove();
      cur.append(...text(cell));
    }
    setMeter(bar, progressParts(b));
  });
}

const filtering = () => Boolean($("f-status").value || $("f-model").value || $("f-q").value.trim());

function showEmpty(rows) {
  $("empty").style.display = rows ? "none" : "";
  $("empty-none").classList.toggle("hidden", filtering());
  $("empty-filtered").classList.toggle("hidden", !filtering());
}

async function refreshHome() {
  const o = await api("console/api/overview");
  document.title = o.service.name + " · console";
  $("model").textContent = "v" + o.service.version + (o.model ? " · model " + o.model : "");
  $("queue-depth").textContent = o.queue.depth + " queued";
  $("queue-detail").textContent = o.queue.running + " running · room for " + (o.queue.max_depth - o.queue.depth) + " more";
  renderPools(o.pools);
  renderModels(o.models, o.upstreams);
  const q = new URLSearchParams({ limit: "50" });
  if ($("f-status").value) q.set("status", $("f-status").value);
  if ($("f-model").value) q.set("model", $("f-model").value);
  if ($("f-q").value.trim()) q.set("q", $("f-q").value.trim());
  const after = cursors[cursors.length - 1];
  if (after) q.set("after", after);
  const page = await api("console/api/batches?" + q);
  lastPage = page;
  renderRows(page.data, o.now);
  showEmpty(page.data.length);
  $("batch-count").textContent = "(" + page.data.length + " shown)";
  $("newer").disabled = cursors.length === 1;
  $("older").disabled = !page.has_more;
  $("page-info").textContent = "page " + cursors.length;
}

// --- charts (uPlot: small, fast, no dependencies, served from this origin) ---
const charts = {};
function chart(id, series) {
  const box = $(id);
  const opts = {
    width: Math.max(200, box.clientWidth),
    height: 160,
    legend: { show: series.length > 1 },
    scales: { x: { time: true } },
    axes: [{}, { size: 60 }],
    series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.color, width: 2, fill: s.fill }))],
  };
  const u = new uPlot(opts, [[], ...series.map(() => [])], box);
  new ResizeObserver(() => u.setSize({ width: Math.max(200, box.clientWidth), height: 160 })).observe(box);
  charts[id] = u;
  return u;
}

async function refreshSeries() {
  if (typeof uPlot === "undefined") return;
  const { points } = await api("console/api/series");
  const t = points.map((p) => p.t);
  if (!charts["chart-tokens"]) {
    chart("chart-tokens", [{ label: "tokens/s", color: "#2e90fa", fill: "rgba(46,144,250,.12)" }]);
    chart("chart-requests", [{ label: "requests/s", color: "#12b76a", fill: "rgba(18,183,106,.12)" }]);
    chart("chart-queue", [{ label: "queued", color: "#f79009" }]);
  }
  charts["chart-tokens"].setData([t, points.map((p) => p.tokens_per_second)]);
  charts["chart-requests"].setData([t, points.map((p) => p.requests_per_second)]);
  charts["chart-queue"].setData([t, points.map((p) => p.queue_depth)]);
  const pools = [...new Set(points.flatMap((p) => Object.keys(p.pools)))];
  const key = pools.join(",");
  if (charts.poolsKey !== key) {
    charts["chart-pools"]?.destroy();
    $("chart-pools").replaceChildren();
    const colors = ["#2e90fa", "#7a5af8", "#12b76a", "#f79009"];
    chart("chart-pools", pools.map((name, i) => ({ label: name, color: colors[i % colors.length] })));
    charts.poolsKey = key;
  }
  charts["chart-pools"].setData([t, ...pools.map((name) => points.map((p) => (p.pools[name] ? p.pools[name].in_use : null)))]);
}

// --- one batch's page ---
let shown = null;

function fact(dl, name, value) {
  const d = el("div");
  d.append(el("dt", "", name), el("dd", "", value === null || value === undefined || value === "" ? "—" : value));
  dl.appendChild(d);
}

async function refreshBatch(id) {
  const d = await api("console/api/batches/" + encodeURIComponent(id));
  shown = d;
  const b = d.batch;
  $("b-id").textContent = b.id;
  $("b-status").className = "badge " + b.status;
  $("b-status").textContent = b.status.replace("_", " ");
  document.title = b.id + " · " + b.status;
  const { c, total, pct } = counts(b);
  const n = d.line_error_counts || { failed: c.failed, not_run: 0 };
  setMeter($("b-meter"), progressParts(b, n));
  const rate = b.status === "in_progress" ? rateOf(b) : null;
  const failed = n.failed + " failed" + (n.not_run ? " · " + n.not_run + " not run" : "");
  $("b-progress").textContent =
    c.completed + " completed · " + failed + " · " + total + " requests (" + Math.floor(pct(c.completed + c.failed)) + "%)" + (rate ? " · " + rate.text : "");
  const facts = $("b-facts");
  facts.replaceChildren();
  const u = b.usage || {};
  fact(facts, "Model", b.model);
  fact(facts, "Endpoint", b.endpoint);
  fact(facts, "Input file", (d.input_filename || "(deleted)") + " · " + b.input_file_id);
  fact(facts, "Metadata", metadataText(b));
  fact(facts, "Pool", b.pool || (b.status === "validating" ? "queued" : null));
  fact(facts, "Deadline", stamp(b.deadline_at) + " (window " + b.completion_window + ")");
  fact(facts, "SLA", b.deadline_met === true ? "met" : b.deadline_met === false ? "missed" : FINAL.includes(b.status) ? "n/a" : "pending");
  fact(facts, "Usage", (u.input_tokens || 0) + " input (" + ((u.input_tokens_details && u.input_tokens_details.cached_tokens) || 0) + " cached) · " + (u.output_tokens || 0) + " output tokens");
  const e = b.engine_seconds || { spot: 0, dedicated: 0 };
  fact(facts, "Engine time", e.spot.toFixed(1) + " s spot · " + e.dedicated.toFixed(1) + " s dedicated");
  fact(facts, "Cost", costText(b.cost));
  const steps = [
    ["created", b.created_at],
    ["in progress", b.in_progress_at],
    ["finalizing", b.finalizing_at],
    ["cancelling", b.cancelling_at],
    ["completed", b.completed_at],
    ["failed", b.failed_at],
    ["expired", b.expired_at],
    ["cancelled", b.cancelled_at],
  ].filter(([, t]) => t);
  $("b-timeline").replaceChildren(
    ...steps.map(([name, t]) => {
      const li = el("li");
      li.append(el("strong", "", name), el("span", "muted", stamp(t)));
      return li;
    }),
  );
  const reason = (b.errors && b.errors.data) || [];
  $("b-reason-card").classList.toggle("hidden", b.status !== "failed");
  $("b-reason").textContent = reason.length
    ? reason.slice(0, 3).map((e) => (e.line ? "line " + e.line + ": " : "") + e.message).join("\n") + (reason.length > 3 ? "\n… " + (reason.length - 3) + " more below" : "")
    : b.status === "failed" ? "The batch failed while it ran: see its failed lines." : "";
  $("b-shards").replaceChildren(
    ...d.shards.map((s) => {
      const tr = el("tr");
      tr.append(el("td", "", "#" + s.idx), el("td", "", s.state), el("td", "", s.worker || "—"), el("td", "", s.completed + s.failed + " / " + s.total));
      return tr;
    }),
  );
  const w = d.webhook;
  $("b-webhook").textContent = !w
    ? "No webhook for this batch (WEBHOOK_URL is not set, or it has not ended)."
    : w.type + " → " + w.url + ": " + (w.delivered_at ? "delivered " + stamp(w.delivered_at) : w.gave_up ? "given up" : "pending, next attempt " + clock(w.next_at)) +
      " · " + w.attempts + " attempt(s)" + (w.last_error ? " · last: " + w.last_error : "") + " · event " + w.event_id;
  const all = n.failed + n.not_run;
  $("b-errors-count").textContent = "(" + all + (d.line_errors.length < all ? ", the first " + d.line_errors.length + " shown" : "") + ")";
  $("b-errors").replaceChildren(
    ...d.line_errors.map((e) => {
      const tr = el("tr", "line-error" + (e.not_run ? " not-run" : ""));
      const what = el("td", "", "");
      what.appendChild(el("span", "badge " + (e.not_run ? "not-run" : "failed"), e.not_run ? "not run" : "failed"));
      const cells = [
        [el("td", "", e.line === null ? "—" : e.line), "Line"],
        [what, "Result"],
        [el("td", "wrap", e.custom_id || "—"), "custom_id"],
        [el("td", "", e.code), "Code"],
        [el("td", "wrap message", e.message), "Message"],
      ];
      for (const [td, label] of cells) td.dataset.label = label;
      tr.append(...cells.map(([td]) => td));
      return tr;
    }),
  );
  $("b-dl-output").disabled = !b.output_file_id;
  $("b-dl-errors").disabled = !b.error_file_id;
  $("b-dl-input").disabled = !d.input_filename;
  $("b-cancel").disabled = FINAL.includes(b.status) || b.status === "cancelling";
  $("b-retry").disabled = !FINAL.includes(b.status) || !(b.request_counts && b.request_counts.failed);
}

/** Downloads a file through fetch (so the key goes along), then hands the browser the bytes. */
async function download(fileId, name) {
  const res = await fetch("v1/files/" + encodeURIComponent(fileId) + "/content", { headers: apiKey ? { Authorization: "Bearer " + apiKey } : {} });
  if (!res.ok) throw new Error("download answered HTTP " + res.status);
  const url = URL.createObjectURL(await res.blob());
  const a = el("a");
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

function confirmDialog(text, yes) {
  return new Promise((resolve) => {
    const dlg = $("confirm");
    $("confirm-text").textContent = text;
    $("confirm-yes").textContent = yes;
    dlg.addEventListener("close", () => resolve(dlg.returnValue === "yes"), { once: true });
    dlg.showModal();
    $("confirm-no").focus();
  });
}

async function act(work) {
  const out = $("b-action-result");
  out.className = "";
  out.textContent = "";
  try {
    await work(out);
  } catch (err) {
    out.className = "error";
    out.textContent = err.message;
  }
}

$("b-dl-input").addEventListener("click", () => act(() => download(shown.batch.input_file_id, shown.input_filename || shown.batch.id + "_input.jsonl")));
$("b-dl-output").addEventListener("click", () => act(() => download(shown.batch.output_file_id, shown.batch.id + "_output.jsonl")));
$("b-dl-errors").addEventListener("click", () => act(() => download(shown.batch.error_file_id, shown.batch.id + "_errors.jsonl")));
$("b-cancel").addEventListener("click", () =>
  act(async (out) => {
    if (!(await confirmDialog("Cancel " + shown.batch.id + "? Requests already running finish and keep their results; the rest are not run.", "Cancel batch"))) return;
    const b = await api("v1/batches/" + encodeURIComponent(shown.batch.id) + "/cancel", { method: "POST" });
    out.textContent = "Cancel sent: the batch is " + b.status.replace("_", " ") + ".";
    await refreshBatch(shown.batch.id);
  }),
);
$("b-retry").addEventListener("click", () =>
  act(async (out) => {
    if (!(await confirmDialog("Create a new batch from the " + shown.batch.request_counts.failed + " failed or unrun lines of " + shown.batch.id + "?", "Retry"))) return;
    const b = await api("v1/batches/" + encodeURIComponent(shown.batch.id) + "/retry", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    out.textContent = "Created " + b.id + ".";
    location.hash = "#batch/" + b.id;
  }),
);

// --- navigation and polling ---
function route() {
  const m = /^#batch\/(batch_[A-Za-z0-9_-]+)$/.exec(location.hash);
  $("home").classList.toggle("hidden", Boolean(m));
  $("batch-page").classList.toggle("hidden", !m);
  return m ? m[1] : null;
}

function setLive(ok, message) {
  const live = $("live");
  live.className = ok ? "on" : "off";
  live.textContent = ok ? "live · updated " + new Date().toLocaleTimeString() : "disconnected";
  $("error").textContent = ok ? "" : message || "";
}

let timer;
async function poll() {
  clearTimeout(timer);
  try {
    const id = route();
    if (id) await refreshBatch(id);
    else await refreshHome();
    setLive(true);
  } catch (err) {
    setLive(false, err.message);
  }
  timer = setTimeout(poll, POLL_MS);
}

async function pollSeries() {
  try {
    if (!route()) await refreshSeries();
  } catch {
    // The next poll says what is wrong.
  }
  setTimeout(pollSeries, SERIES_MS);
}

for (const s of STATUSES) $("f-status").appendChild(new Option(s.replace("_", " "), s));
const resetPage = () => {
  cursors = [null];
  poll();
};
$("f-status").addEventListener("change", resetPage);
$("f-model").addEventListener("change", resetPage);
let typing;
$("f-q").addEventListener("input", () => {
  clearTimeout(typing);
  typing = setTimeout(resetPage, 250);
});
$("filters").addEventListener("submit", (e) => e.preventDefault());
$("clear-filters").addEventListener("click", () => {
  $("f-status").value = "";
  $("f-model").value = "";
  $("f-q").value = "";
  resetPage();
});
$("older").addEventListener("click", () => {
  if (!lastPage.has_more) return;
  cursors.push(lastPage.last_id);
  poll();
});
$("newer").addEventListener("click", () => {
  if (cursors.length > 1) cursors.pop();
  poll();
});
$("keyform").addEventListener("submit", (e) => {
  e.preventDefault();
  apiKey = $("key").value.trim();
  sessionStorage.setItem("obi-api-key", apiKey);
  poll();
  pollSeries();
});
window.addEventListener("hashchange", async () => {
  const onBatch = Boolean(route());
  if (onBatch) window.scrollTo(0, 0);
  await poll();
  // A section's link: the home page is back in view, so scroll to the section now.
  const target = !onBatch && location.hash.length > 1 && document.getElementById(location.hash.slice(1));
  if (target) target.scrollIntoView();
});
poll();
pollSeries();
