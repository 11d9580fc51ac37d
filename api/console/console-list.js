// @ts-check
// The home page's batch list: rows updated in place (keyed by batch id), cards on a phone; the pools, models and
// lanes beside it are console-panels.js's, and each row's progress console-progress.js's.
import { $, api, clock, duration, el, endedAt, FINAL, hideEmpty, keyedRows, labelledRow, stamp } from "./console-api.js";
import { renderLanes, renderModels, renderPools } from "./console-panels.js";
import { counts, metadataText, meter, pausedNow, progressParts, rateOf, refusal, setMeter } from "./console-progress.js";

/** @typedef {import("./console-api.js").Batch} Batch */

/** The list's cursors: the `after` of each page shown so far (null: the newest), and the last page's end. */
export const listState = {
  cursors: /** @type {(string | null)[]} */ ([null]),
  lastPage: { has_more: false, last_id: /** @type {string | null} */ (null) },
};
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
  const refused = refusal(b);
  if (refused) {
    td.appendChild(el("div", "muted", refused));
    return td;
  }
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
 * A model's name that may break after each "-", "_", "." or "/" (a name of one long word wraps there) and nowhere
 * else, so a short one stays whole.
 * @param {string} name
 */
function modelCell(name) {
  const td = el("td", "model");
  for (const part of name.split(/(?<=[-_./])/)) td.append(part, el("wbr"));
  return td;
}

/**
 * @param {Batch} b
 * @param {number} now
 */
function batchRow(b, now) {
  const id = el("td", "id");
  const link = /** @type {HTMLAnchorElement} */ (el("a", "open"));
  link.href = `#batch/${b.id}`;
  link.appendChild(el("code", "", b.id));
  id.appendChild(link);
  const sub = [b.input_filename, metadataText(b)].filter(Boolean).join(" · ");
  if (sub) id.appendChild(el("div", "muted meta", sub));
  const status = el("td", "status");
  status.appendChild(el("span", `badge ${b.status}`, b.status.replace("_", " ")));
  if (pausedNow(b)) status.appendChild(el("span", "badge paused", "paused"));
  const reason = b.errors?.data?.[0];
  if (b.status === "failed" && reason) {
    const text = (reason.line ? `line ${reason.line}: ` : "") + reason.message;
    status.appendChild(el("div", "muted reason wrap", text.length > 90 ? `${text.slice(0, 89)}…` : text));
  }
  const tr = labelledRow("batch", [
    [id, "Batch"],
    [el("td", "key-col", b.api_key_id === undefined ? "" : (b.api_key_id ?? "open API")), "Key"],
    [modelCell(b.model || "—"), "Model"],
    [status, "Status"],
    [progressCell(b, now), "Progress"],
    [el("td", "pool", b.pool || (b.status === "validating" ? "queued" : "—")), "Pool"],
    [deadlineCell(b, now), "Deadline"],
    [slaCell(b), "SLA"],
    [timesCell(b), "Times"],
  ]);
  tr.dataset.id = b.id;
  tr.dataset.status = b.status;
  return tr;
}

/**
 * The rows updated in place by batch id (keyedRows), a progress cell keeping its bar, so the bars glide.
 * @param {Batch[]} batches
 * @param {number} now
 */
export function renderRows(batches, now) {
  keyedRows(
    $("batch-rows"),
    batches,
    (b) => b.id,
    (b) => batchRow(b, now),
    syncRow,
  );
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
  hideEmpty("batch-table", rows);
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

/**
 * The header's version and model, from the overview.
 * @param {any} o
 */
const showService = (o) => {
  $("model").textContent = `v${o.service.version}${o.model ? ` · model ${o.model}` : ""}`;
};

/** The header alone, for a page that is not the home page. */
export async function refreshService() {
  showService(await api("console/api/overview"));
}

export async function refreshHome() {
  const o = await api("console/api/overview");
  document.title = `${o.service.name} · console`;
  showService(o);
  $("queue-depth").textContent = `${o.queue.depth} queued`;
  $("queue-detail").textContent = `${o.queue.running} running · room for ${o.queue.max_depth - o.queue.depth} more`;
  renderPools(o.pools, o.now);
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
