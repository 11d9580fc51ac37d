// @ts-check
// The console: polls the service's JSON (relative URLs, so it works behind a path prefix) and updates the page in
// place. Browser ES modules, no build step, no framework; type-checked from JSDoc (api/console/tsconfig.json).
import { $, STATUSES, setApiKey } from "./console-api.js";
import { refreshBatch } from "./console-batch.js";
import { refreshSeries } from "./console-charts.js";
import { listState, refreshHome } from "./console-list.js";
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
 * @param {boolean} ok
 * @param {string} [message]
 */
function setLive(ok, message) {
  const live = $("live");
  live.className = ok ? "on" : "off";
  live.textContent = ok ? `live · updated ${new Date().toLocaleTimeString()}` : "disconnected";
  $("error").textContent = ok ? "" : message || "";
}

/** @type {ReturnType<typeof setTimeout> | undefined} */
let timer;
async function poll() {
  clearTimeout(timer);
  try {
    const id = route();
    if (id) await refreshBatch(id);
    else await refreshHome();
    setLive(true);
  } catch (err) {
    setLive(false, err instanceof Error ? err.message : String(err));
  }
  timer = setTimeout(poll, POLL_MS);
}

async function pollSeries() {
  try {
    if (!route()) await Promise.all([refreshSeries(), refreshUsage()]);
  } catch {
    // The next poll says what is wrong.
  }
  setTimeout(pollSeries, SERIES_MS);
}

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
$("keyform").addEventListener("submit", (/** @type {Event} */ e) => {
  e.preventDefault();
  setApiKey($("key").value.trim());
  poll();
  pollSeries();
});
window.addEventListener("hashchange", async () => {
  const onBatch = Boolean(route());
  if (onBatch) window.scrollTo(0, 0);
  await poll();
  // The link followed is hidden now (a row of the list, "All batches"): focus goes to the heading of what opened,
  // so the keyboard and a screen reader go on from there rather than from the page's start.
  if (onBatch) return $("b-title").focus();
  // A section's link: the home page is back in view, so scroll to the section now.
  const target = location.hash.length > 1 && document.getElementById(location.hash.slice(1));
  if (!target) return;
  target.scrollIntoView();
  target.querySelector("h2")?.focus({ preventScroll: true });
});
poll();
pollSeries();
