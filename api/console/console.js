// @ts-check
// The console: polls the service's JSON (relative URLs, so it works behind a path prefix) and updates the page in
// place. Browser ES modules, no build step, no framework; type-checked from JSDoc (api/console/tsconfig.json).
import { $, ApiError, STATUSES, setApiKey } from "./console-api.js";
import { batchHeading, refreshBatch } from "./console-batch.js";
import { refreshSeries } from "./console-charts.js";
import { listState, refreshHome, refreshService } from "./console-list.js";
import { refreshUsage } from "./console-usage.js";

const POLL_MS = 1000;
const SERIES_MS = 5000;

function route() {
  const m = /^#batch\/(batch_[A-Za-z0-9_-]+)$/.exec(location.hash);
  $("home").classList.toggle("hidden", Boolean(m));
  $("batch-page").classList.toggle("hidden", !m);
  return m ? m[1] : null;
}

/**
 * The connection's state: live (the service answers), waiting for a key (it answers 401), or disconnected.
 * @param {"on" | "key" | "off"} state
 * @param {string} [message] what went wrong, said under the header
 */
function setLive(state, message = "") {
  const live = $("live");
  live.className = state;
  live.textContent =
    state === "on" ? `live · updated ${new Date().toLocaleTimeString()}` : state === "key" ? "waiting for an API key" : "disconnected";
  $("error").textContent = message;
}

/**
 * Runs `work` now, then every `ms` in one loop: a call while a run is in flight (a filter changed, a key entered)
 * takes the loop over, so the loops never multiply.
 * @param {() => Promise<void>} work
 * @param {number} ms
 */
function loop(work, ms) {
  let generation = 0;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  const run = async () => {
    const mine = ++generation;
    clearTimeout(timer);
    await work();
    if (mine === generation) timer = setTimeout(run, ms);
  };
  return run;
}

const poll = loop(async () => {
  const id = route();
  try {
    if (id) {
      await refreshBatch(id);
      // The header's version and model come with the home page's overview: a batch opened first reads it once.
      if (!$("model").textContent) await refreshService();
    } else await refreshHome();
    setLive("on");
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    // The service answered: it is there. A batch's page says itself that it needs a key.
    if (err instanceof ApiError) setLive(err.status === 401 ? "key" : "on", err.status === 401 && id ? "" : message);
    else setLive("off", message);
  }
}, POLL_MS);

const pollSeries = loop(async () => {
  try {
    if (!route()) await Promise.all([refreshSeries(), refreshUsage()]);
  } catch {
    // The next poll says what is wrong.
  }
}, SERIES_MS);

for (const s of STATUSES) $("f-status").appendChild(new Option(s.replace("_", " "), s));
const resetPage = () => {
  listState.cursors = [null];
  poll();
};
$("f-status").addEventListener("change", resetPage);
$("f-model").addEventListener("change", resetPage);
$("f-key").addEventListener("change", resetPage);
/** @type {ReturnType<typeof setTimeout> | undefined} */
let typing;
$("f-q").addEventListener("input", () => {
  clearTimeout(typing);
  typing = setTimeout(resetPage, 250);
});
$("filters").addEventListener("submit", (/** @type {Event} */ e) => e.preventDefault());
$("clear-filters").addEventListener("click", () => {
  $("f-status").value = "";
  $("f-model").value = "";
  $("f-q").value = "";
  resetPage();
});
$("older").addEventListener("click", () => {
  if (!listState.lastPage.has_more) return;
  listState.cursors.push(listState.lastPage.last_id);
  poll();
});
$("newer").addEventListener("click", () => {
  if (listState.cursors.length > 1) listState.cursors.pop();
  poll();
});
$("keyform").addEventListener("submit", async (/** @type {Event} */ e) => {
  e.preventDefault();
  setApiKey($("key").value.trim());
  pollSeries();
  await poll();
  // A key accepted hides the form, and the field focused with it: focus goes to what the key opened.
  if (!$("keyform").classList.contains("show")) (route() ? batchHeading() : $("h-pools")).focus();
});
window.addEventListener("hashchange", async () => {
  const onBatch = Boolean(route());
  if (onBatch) window.scrollTo(0, 0);
  await poll();
  // The link followed is hidden now (a row of the list, "All batches"): focus goes to the heading of what opened,
  // so the keyboard and a screen reader go on from there rather than from the page's start.
  if (onBatch) return batchHeading().focus();
  // A section's link: the home page is back in view, so scroll to the section now.
  const target = location.hash.length > 1 && document.getElementById(location.hash.slice(1));
  if (!target) return;
  target.scrollIntoView();
  target.querySelector("h2")?.focus({ preventScroll: true });
});
poll();
pollSeries();
