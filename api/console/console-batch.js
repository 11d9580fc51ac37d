// @ts-check
// One batch's page: its facts, timeline, shards, first results, webhook and failed lines, downloads (the output
// while it runs too: the lines committed so far), pause, resume, cancel and retry.
import { $, ApiError, api, clock, el, FINAL, getApiKey, hideEmpty, stamp } from "./console-api.js";
import { costText, counts, metadataText, pausedNow, progressParts, rateOf, refusal, setMeter } from "./console-progress.js";

/**
 * What the console's API says of one batch (domain/batch-views.ts's BatchInspection).
 * @typedef {{ batch: import("./console-api.js").Batch; input_filename: string | null; shards: any[]; webhook: any;
 *   line_errors: Array<{ line: number | null; custom_id: string | null; code: string; message: string; not_run: boolean }>;
 *   line_error_counts?: { failed: number; not_run: number }; api_key_id?: string | null; own?: boolean }} Inspection
 */

/** The batch on show (the downloads, cancel and retry act on it); none while the page has no batch to show. @type {Inspection | undefined} */
let shown;
/** The batch and the state the last action's result speaks of: once the batch is in another, the result is stale. */
let said = { id: "", status: "", paused: false };
/** Results shown on the page at most. */
const FIRST = 5;
/** The first results shown, and whose. @type {{ id: string; lines: any[] }} */
let first = { id: "", lines: [] };

/**
 * @param {HTMLElement} dl
 * @param {string} name
 * @param {unknown} value
 */
function fact(dl, name, value) {
  const d = el("div");
  d.append(el("dt", "", name), el("dd", "", value === null || value === undefined || value === "" ? "—" : value));
  dl.appendChild(d);
}

/** The page's heading: the batch's, or the sentence that says why there is none. */
export const batchHeading = () => (shown ? $("b-title") : $("b-missing-title"));

/** Refreshes are numbered as asked; the page shows none older than one it shows, or than an action's result. */
let asked = 0;
let shownUpTo = 0;

/**
 * A batch's page, refreshed. An answer to a refresh asked before a newer one was shown, or before an action's own
 * refresh (`afterAction`), describes the batch as it was: a poll that did not see a pause would take the action's
 * result away, and the badge back.
 * @param {string} id
 * @param {boolean} [afterAction]
 */
export async function refreshBatch(id, afterAction = false) {
  const mine = ++asked;
  if (afterAction) shownUpTo = mine - 1;
  /** @type {Inspection} */
  let d;
  try {
    d = await api(`console/api/batches/${encodeURIComponent(id)}`);
  } catch (err) {
    if (mine <= shownUpTo) return;
    if (!(err instanceof ApiError) || (err.status !== 401 && err.status !== 404)) throw err;
    return showMissing(id, err.status);
  }
  if (mine <= shownUpTo) return;
  shownUpTo = mine;
  showFound(d);
  const b = d.batch;
  $("b-id").textContent = b.id;
  $("b-status").className = `badge ${b.status}`;
  $("b-status").textContent = pausedNow(b) ? `${b.status.replace("_", " ")} · paused` : b.status.replace("_", " ");
  document.title = `${b.id} · ${b.status}`;
  const { c, total, pct } = counts(b);
  const n = d.line_error_counts || { failed: c.failed, not_run: 0 };
  settle(b, n);
  setMeter($("b-meter"), progressParts(b, n));
  const rate = b.status === "in_progress" && !pausedNow(b) ? rateOf(b) : null;
  const failed = `${n.failed} failed${n.not_run ? ` · ${n.not_run} not run` : ""}`;
  const refused = refusal(b);
  // A share done while it runs, of the lines the text counts; once it ends, or while a cancel calls lines off, the
  // counts say it all (lines not run are not "100%" of anything, and a cancel's failed lines are not yet written).
  const settling = FINAL.includes(b.status) || b.status === "cancelling";
  const share = settling ? "" : ` (${Math.floor(pct(c.completed + n.failed + n.not_run))}%)`;
  $("b-progress").textContent =
    refused ?? `${c.completed} completed · ${failed} · ${total} requests${share}${rate ? ` · ${rate.text}` : ""}`;
  showCached(b, total);
  showFacts(d);
  showTimeline(b);
  showReason(b, Boolean(refused));
  showShards(d, n, Boolean(refused));
  showWebhook(d.webhook);
  showLineErrors(d, n, Boolean(refused));
  await showFirst(b, c.completed, d.own !== false);
  showActions(d, c.completed);
}

/**
 * The lines answered without running (repeats and result cache hits), where there are any: "312 of 2,000 answered
 * from cache".
 * @param {any} b
 * @param {number} total
 */
function showCached(b, total) {
  const cached = typeof b.cached_lines === "number" ? b.cached_lines : 0;
  $("b-cached").classList.toggle("hidden", cached === 0);
  $("b-cached").textContent = cached ? `${cached.toLocaleString("en-US")} of ${total.toLocaleString("en-US")} answered from cache` : "";
}

/**
 * A page with no batch to show offers no action and says why: no key yet (the key form asks for it, and the batch
 * opens once it is given), or no such batch for this key.
 * @param {string} id
 * @param {number} status the service's answer: 401 or 404
 */
function showMissing(id, status) {
  shown = undefined;
  say("", "");
  $("b-body").classList.add("hidden");
  $("b-back").classList.add("hidden");
  $("b-missing").classList.remove("hidden");
  const key = getApiKey();
  if (status === 401) {
    document.title = "API key needed · console";
    $("b-missing-title").textContent = key ? "That API key was not accepted" : "An API key is needed";
    $("b-missing-text").textContent = `Enter ${key ? "another" : "the"} API key above to show batch ${id}.`;
    return;
  }
  document.title = "No such batch · console";
  $("b-missing-title").textContent = "No such batch";
  $("b-missing-text").textContent = key
    ? `There is no batch ${id} for this key: the id is wrong, or the batch is another key's (a key sees its own batches only).`
    : `There is no batch ${id} on this service: the id is wrong, or the batch was deleted.`;
}

/** @param {Inspection} d */
function showFound(d) {
  shown = d;
  $("b-body").classList.remove("hidden");
  $("b-back").classList.remove("hidden");
  $("b-missing").classList.add("hidden");
}

/**
 * The last action's result, and the batch and state it speaks of.
 * @param {string} text
 * @param {string} cls
 * @param {import("./console-api.js").Batch} [b]
 */
function say(text, cls, b) {
  const out = $("b-action-result");
  out.className = cls;
  out.textContent = text;
  said = b ? { id: b.id, status: b.status, paused: pausedNow(b) } : { id: "", status: "", paused: false };
}

/**
 * The last action's result stays while the batch is as it left it; a cancel that went through says how it ended,
 * and anything else that changed (another batch shown, a status moved on) takes the result away.
 * @param {import("./console-api.js").Batch} b
 * @param {{ failed: number; not_run: number }} n
 */
function settle(b, n) {
  if (!said.id || (said.id === b.id && said.status === b.status && said.paused === pausedNow(b))) return;
  if (said.id === b.id && said.status === "cancelling" && b.status === "cancelled")
    return say(`Cancelled: ${counts(b).c.completed} completed · ${n.failed} failed · ${n.not_run} not run.`, "", b);
  say("", "");
}

/** @param {Inspection} d */
function showFacts(d) {
  const b = d.batch;
  const facts = $("b-facts");
  facts.replaceChildren();
  const u = b.usage || {};
  fact(facts, "Model", b.model);
  fact(facts, "Endpoint", b.endpoint);
  fact(facts, "Input file", `${d.input_filename || "(deleted)"} · ${b.input_file_id}`);
  fact(facts, "Metadata", metadataText(b));
  fact(facts, "Pool", b.pool || (b.status === "validating" ? "queued" : null));
  fact(facts, "Deadline", `${stamp(b.deadline_at)} (window ${b.completion_window})`);
  fact(facts, "SLA", b.deadline_met === true ? "met" : b.deadline_met === false ? "missed" : FINAL.includes(b.status) ? "n/a" : "pending");
  fact(
    facts,
    "Usage",
    (u.input_tokens || 0) +
      " input (" +
      (u.input_tokens_details?.cached_tokens || 0) +
      " cached) · " +
      (u.output_tokens || 0) +
      " output tokens",
  );
  const e = b.engine_seconds || { spot: 0, dedicated: 0 };
  fact(facts, "Engine time", `${e.spot.toFixed(1)} s spot · ${e.dedicated.toFixed(1)} s dedicated`);
  fact(facts, "Cost", costText(b.cost));
}

/** @param {import("./console-api.js").Batch} b */
function showTimeline(b) {
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
}

/** What a batch that ended early did to the shards it left unfinished. */
const ENDED_EARLY = { cancelled: "cancelled", expired: "expired", failed: "stopped" };

/**
 * Each shard's lines. A shard counts the lines a cancel, an expiry or a stop left unrun with its failed ones: on a
 * batch that ended early, a shard it cut short reads as the batch ended (never "done 200 / 200"), its lines told
 * apart where the batch's counts allow it.
 * @param {Inspection} d
 * @param {{ failed: number; not_run: number }} n
 * @param {boolean} refused
 */
function showShards(d, n, refused) {
  hideEmpty("shards-table", d.shards.length);
  $("b-shards-none").textContent = d.shards.length ? "" : refused ? "None: no request ran." : "None yet: its lines are checked first.";
  const early = n.not_run > 0 ? ENDED_EARLY[/** @type {keyof typeof ENDED_EARLY} */ (d.batch.status)] : undefined;
  $("b-shards").replaceChildren(
    ...d.shards.map((/** @type {any} */ s) => {
      const stopped = Boolean(early) && s.completed < s.total;
      const tr = el("tr");
      tr.append(
        el("td", "", `#${s.idx}`),
        el("td", "", stopped ? /** @type {string} */ (early) : s.state),
        el("td", "", s.worker || "—"),
        el("td", "", stopped ? shardEnded(s, d.shards.length, n) : `${s.completed + s.failed} / ${s.total}`),
      );
      return tr;
    }),
  );
}

/**
 * A shard of a batch that ended early: what completed, what failed, what never ran, of its lines.
 * @param {{ completed: number; total: number }} s
 * @param {number} shards the batch's
 * @param {{ failed: number; not_run: number }} n the batch's error lines
 */
function shardEnded(s, shards, n) {
  const parts = [`${s.completed} completed`];
  // Told apart with one shard (the batch's counts are its), or where no line failed (every other line never ran).
  const [failed, notRun] = shards === 1 ? [n.failed, n.not_run] : n.failed === 0 ? [0, s.total - s.completed] : [null, null];
  if (failed === null) parts.push(`${s.total - s.completed} failed or not run`);
  else {
    if (failed) parts.push(`${failed} failed`);
    if (notRun) parts.push(`${notRun} not run`);
  }
  return `${parts.join(" · ")} · of ${s.total}`;
}

/** @param {any} w the batch's webhook delivery, or null */
function showWebhook(w) {
  $("b-webhook").textContent = !w
    ? "No webhook for this batch (WEBHOOK_URL is not set, or it has not ended)."
    : w.type +
      " → " +
      w.url +
      ": " +
      (w.delivered_at ? `delivered ${stamp(w.delivered_at)}` : w.gave_up ? "given up" : `pending, next attempt ${clock(w.next_at)}`) +
      " · " +
      w.attempts +
      " attempt(s)" +
      (w.last_error ? ` · last: ${w.last_error}` : "") +
      " · event " +
      w.event_id;
}

/**
 * Its failed and unrun lines. A batch refused before it ran has none: its reason says what was wrong.
 * @param {Inspection} d
 * @param {{ failed: number; not_run: number }} n
 * @param {boolean} refused
 */
function showLineErrors(d, n, refused) {
  const all = n.failed + n.not_run;
  $("b-errors-card").classList.toggle("hidden", refused);
  hideEmpty("errors-table", d.line_errors.length);
  $("b-errors-none").textContent = all ? "" : FINAL.includes(d.batch.status) ? "None: every line ran and succeeded." : "None so far.";
  $("b-errors-count").textContent = `(${all}${d.line_errors.length < all ? `, the first ${d.line_errors.length} shown` : ""})`;
  $("b-errors").replaceChildren(
    ...d.line_errors.map((e) => {
      const tr = el("tr", `line-error${e.not_run ? " not-run" : ""}`);
      const what = el("td", "", "");
      what.appendChild(el("span", `badge ${e.not_run ? "not-run" : "failed"}`, e.not_run ? "not run" : "failed"));
      /** @type {Array<[HTMLElement, string]>} */
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
}

/**
 * The buttons this key can use on the batch. An admin reads every key's batches and may pause and resume any;
 * cancelling, retrying, the results and the files are the batch's own key's, so on another key's batch those
 * buttons are gone and the page says whose it is.
 * @param {Inspection} d
 * @param {number} completed
 */
function showActions(d, completed) {
  const b = d.batch;
  const own = d.own !== false;
  const ended = FINAL.includes(b.status);
  // While it runs, the output so far (committed lines only, in the order the finished file keeps).
  $("b-dl-output").disabled = ended ? !b.output_file_id : !completed;
  // Completed lines and no output file: it was deleted (or expired), which a bare disabled button would not say.
  const gone = ended && !b.output_file_id && completed > 0;
  $("b-dl-output").textContent = gone ? "Output file deleted" : ended ? "Download output" : `Download results so far (${completed})`;
  $("b-dl-output").title = gone ? "Its output file has been deleted or has expired: its answers are gone." : "";
  $("b-dl-errors").disabled = !b.error_file_id;
  $("b-dl-input").disabled = !d.input_filename;
  // A batch made from a dataset downloads as its table once it has ended.
  $("b-table").classList.toggle("hidden", !own || !b.metadata?.dataset_input_file_id);
  $("b-dl-table").disabled = !ended;
  $("b-cancel").disabled = ended || b.status === "cancelling";
  // One of the two shows while the batch has not ended: Pause while it runs, Resume while it is paused.
  const open = !ended && b.status !== "cancelling" && b.status !== "finalizing";
  $("b-pause").classList.toggle("hidden", !open || pausedNow(b));
  $("b-resume").classList.toggle("hidden", !open || !pausedNow(b));
  $("b-retry").disabled = !ended || !b.request_counts?.failed;
  for (const id of ["b-dl-input", "b-dl-output", "b-dl-errors", "b-cancel", "b-retry"]) $(id).classList.toggle("hidden", !own);
  $("b-owner").classList.toggle("hidden", own);
  $("b-owner").textContent = own
    ? ""
    : `This batch is ${d.api_key_id ? `key ${d.api_key_id}'s` : "another key's"}. As an admin you may read it, pause and ` +
      "resume it; only its own key can cancel or retry it or read its results (its output, error and input files, its table).";
}

/**
 * Why it failed: its reason, or each problem of its input file (up to 100, by line) when it was refused at validation.
 * @param {import("./console-api.js").Batch} b
 * @param {boolean} refused
 */
function showReason(b, refused) {
  const reason = b.errors?.data || [];
  $("b-reason-card").classList.toggle("hidden", b.status !== "failed");
  $("b-reason-title").textContent = refused ? "Why it was refused" : "Why it failed";
  $("b-reason").textContent = reason.length
    ? reason.map((/** @type {{ line?: number; message: string }} */ e) => (e.line ? `line ${e.line}: ` : "") + e.message).join("\n")
    : b.status === "failed"
      ? "The batch failed while it ran: see its failed lines."
      : "";
}

/**
 * The batch's first output lines (read once there are more than shown, until FIRST are).
 * @param {import("./console-api.js").Batch} b
 * @param {number} completed
 * @param {boolean} own
 */
async function showFirst(b, completed, own) {
  // Another key's results are its own: an admin reading the batch is shown none of them.
  $("b-first-card").classList.toggle("hidden", !own);
  if (!own) return;
  if (first.id !== b.id) first = { id: b.id, lines: [] };
  if (first.lines.length < FIRST && completed > first.lines.length) {
    const res = await fetch(`v1/batches/${encodeURIComponent(b.id)}/output?limit=${FIRST}`, { cache: "no-store", headers: auth() });
    if (res.ok && first.id === b.id)
      first.lines = (await res.text())
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l));
  }
  $("b-first-none").classList.toggle("hidden", first.lines.length > 0);
  $("b-first-none").textContent = refusal(b)
    ? "None: no request ran."
    : FINAL.includes(b.status) && !completed
      ? "None: no line completed."
      : "No result is committed yet.";
  hideEmpty("first-table", first.lines.length);
  $("b-first-count").textContent = first.lines.length ? `(the first ${first.lines.length} of ${completed})` : "";
  $("b-first").replaceChildren(
    ...first.lines.map((l) => {
      const tr = el("tr");
      const body = l.response?.body;
      /** @type {Array<[HTMLElement, string]>} */
      const cells = [
        [el("td", "wrap", l.custom_id), "custom_id"],
        [el("td", "", l.response?.status_code ?? "—"), "Status"],
        [el("td", "wrap message", answerOf(body)), "Answer"],
      ];
      for (const [td, label] of cells) td.dataset.label = label;
      tr.append(...cells.map(([td]) => td));
      return tr;
    }),
  );
}

/**
 * A result's answer as one short text, whatever the endpoint.
 * @param {any} body
 */
function answerOf(body) {
  const text =
    body?.choices?.[0]?.message?.content ??
    body?.choices?.[0]?.text ??
    body?.content?.[0]?.text ??
    (body?.data?.[0]?.embedding ? `embedding of ${body.data[0].embedding.length} dimensions` : null) ??
    (body?.results ? `${body.results.length} ranked` : null) ??
    JSON.stringify(body ?? null);
  return String(text).length > 200 ? `${String(text).slice(0, 200)}…` : String(text);
}

/** @returns {Record<string, string>} */
const auth = () => (getApiKey() ? { Authorization: `Bearer ${getApiKey()}` } : {});

/** Downloads a file through fetch (so the key goes along), then hands the browser the bytes. */
/**
 * @param {string} fileId
 * @param {string} name
 */
function download(fileId, name) {
  return save(`v1/files/${encodeURIComponent(fileId)}/content`, name);
}

/**
 * @param {string} route
 * @param {string} name
 */
async function save(route, name) {
  const res = await fetch(route, { headers: auth() });
  if (!res.ok) {
    const said = await res.json().catch(() => null);
    throw new Error(said?.error?.message ?? `download answered HTTP ${res.status}`);
  }
  const url = URL.createObjectURL(await res.blob());
  const a = /** @type {HTMLAnchorElement} */ (el("a"));
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/**
 * @param {string} text
 * @param {string} yes the confirming button's label
 * @returns {Promise<boolean>}
 */
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

/**
 * Runs what a button does on the batch on show when it was pressed, its error said in the page; on a page with no
 * batch, nothing.
 * @param {(d: Inspection) => Promise<unknown>} work
 */
async function act(work) {
  const d = shown;
  if (!d) return;
  say("", "");
  try {
    await work(d);
  } catch (err) {
    say(err instanceof Error ? err.message : String(err), "error", d.batch);
  }
}

/** @param {string} id */
const batchPath = (id) => `v1/batches/${encodeURIComponent(id)}`;

$("b-dl-input").addEventListener("click", () =>
  act((d) => download(d.batch.input_file_id, d.input_filename || `${d.batch.id}_input.jsonl`)),
);
// Ended, the output file; while it runs, the output route's lines so far (both the batch's own key's).
$("b-dl-output").addEventListener("click", () =>
  act((d) =>
    FINAL.includes(d.batch.status)
      ? download(d.batch.output_file_id, `${d.batch.id}_output.jsonl`)
      : save(`${batchPath(d.batch.id)}/output`, `${d.batch.id}_output${FINAL.includes(d.batch.status) ? "" : "_so_far"}.jsonl`),
  ),
);
$("b-dl-errors").addEventListener("click", () => act((d) => download(d.batch.error_file_id, `${d.batch.id}_errors.jsonl`)));
$("b-dl-table").addEventListener("click", () =>
  act((d) => {
    const format = /** @type {HTMLSelectElement} */ ($("b-table-format")).value;
    return save(`${batchPath(d.batch.id)}/table?format=${format}`, `${d.batch.id}.${format}`);
  }),
);
$("b-cancel").addEventListener("click", () =>
  act(async (d) => {
    const yes = await confirmDialog(
      `Cancel ${d.batch.id}? Requests already running finish and keep their results; the rest are not run.`,
      "Cancel batch",
    );
    if (!yes) return;
    const b = await api(`${batchPath(d.batch.id)}/cancel`, { method: "POST" });
    say(`Cancel sent: the batch is ${b.status.replace("_", " ")}.`, "", b);
    await refreshBatch(d.batch.id, true);
    // The Cancel button is disabled now: focus goes to what it did.
    $("b-action-result").focus();
  }),
);
for (const action of ["pause", "resume"])
  $(`b-${action}`).addEventListener("click", () =>
    act(async (d) => {
      const b = await api(`${batchPath(d.batch.id)}/${action}`, { method: "POST" });
      say(
        pausedNow(b)
          ? "Paused: requests in flight finish, then nothing runs until you resume. Its deadline still counts."
          : "Resumed: the batch goes on where it stopped.",
        "",
        b,
      );
      await refreshBatch(d.batch.id, true);
      // The button pressed is gone now: focus moves to the one that undoes it, not to the page's start.
      $(action === "pause" ? "b-resume" : "b-pause").focus();
    }),
  );
$("b-retry").addEventListener("click", () =>
  act(async (d) => {
    const yes = await confirmDialog(
      `Create a new batch from the ${d.batch.request_counts?.failed ?? 0} failed or unrun lines of ${d.batch.id}?`,
      "Retry",
    );
    if (!yes) return;
    const b = await api(`${batchPath(d.batch.id)}/retry`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    say(`Created ${b.id}.`, "", b);
    location.hash = `#batch/${b.id}`;
  }),
);
