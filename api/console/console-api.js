// @ts-check
// The console's shared pieces: the page's elements, formatting, and the one fetch of the service's JSON (the key
// goes along; a 401 asks for it). Everything from the server is set with textContent, never parsed as HTML.
/**
 * A batch as the service's JSON gives it (the wire Batch, and the console's extras).
 * @typedef {{ id: string; status: string; request_counts?: { completed: number; failed: number; total: number }; [field: string]: any }} Batch
 */

/** @type {readonly string[]} */
export const FINAL = ["completed", "failed", "expired", "cancelled"];
export const STATUSES = ["validating", "in_progress", "finalizing", "completed", "failed", "expired", "cancelling", "cancelled"];
/** @param {string} id @returns {any} the element (the page has every id the code asks for) */
export const $ = (id) => document.getElementById(id);
let apiKey = sessionStorage.getItem("obi-api-key") || "";
export const getApiKey = () => apiKey;
/** @param {string} key */
export function setApiKey(key) {
  apiKey = key;
  sessionStorage.setItem("obi-api-key", key);
}

/**
 * @param {string} tag
 * @param {string} [cls]
 * @param {unknown} [text]
 * @returns {HTMLElement}
 */
export function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

/**
 * A table row of labelled cells: on a phone each row is a card of labelled fields, as a batch is.
 * @param {string} cls
 * @param {Array<[HTMLElement, string]>} cells
 */
export function labelledRow(cls, cells) {
  const tr = el("tr", cls);
  for (const [td, label] of cells) {
    td.dataset.label = label;
    tr.append(td);
  }
  return tr;
}

/**
 * A table's rows updated in place, by key: a cell is replaced only when what it shows changed, and a row is moved
 * only when the order did, so a focused link and a selection survive every refresh.
 * @template T
 * @param {HTMLElement} body
 * @param {T[]} items
 * @param {(item: T) => string} keyOf
 * @param {(item: T) => HTMLElement} rowOf
 * @param {(tr: HTMLElement, fresh: HTMLElement, item: T) => void} [sync] how a kept row takes the fresh one's content
 */
export function keyedRows(body, items, keyOf, rowOf, sync = syncCells) {
  const old = new Map([...body.children].map((tr) => [/** @type {HTMLElement} */ (tr).dataset.rowKey, tr]));
  /** @type {Element | null} */
  let prev = null;
  for (const item of items) {
    const key = keyOf(item);
    const fresh = rowOf(item);
    fresh.dataset.rowKey = key;
    let tr = old.get(key);
    if (tr) {
      old.delete(key);
      sync(/** @type {HTMLElement} */ (tr), fresh, item);
    } else tr = fresh;
    /** @type {ChildNode | null} */
    const slot = prev ? prev.nextSibling : body.firstChild;
    if (slot !== tr) body.insertBefore(tr, slot);
    prev = tr;
  }
  for (const tr of old.values()) tr.remove();
}

/**
 * A kept row given the fresh one's attributes and the cells whose content changed.
 * @param {HTMLElement} tr
 * @param {HTMLElement} fresh
 */
function syncCells(tr, fresh) {
  for (const { name, value } of fresh.attributes) if (tr.getAttribute(name) !== value) tr.setAttribute(name, value);
  [...fresh.children].forEach((cell, i) => {
    const cur = tr.children[i];
    if (!cur) tr.append(cell);
    else if (cur.outerHTML !== cell.outerHTML) cur.replaceWith(cell);
  });
}

/** @param {number} s seconds */
export function duration(s) {
  s = Math.abs(Math.round(s));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 2 * 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}
/** @param {number | null | undefined} unix */
export const stamp = (unix) => (unix ? new Date(unix * 1000).toLocaleString() : "—");
/** @param {number | null | undefined} unix */
export const clock = (unix) => (unix ? new Date(unix * 1000).toLocaleTimeString() : "—");
/** @param {Batch} b */
export const endedAt = (b) => b.completed_at || b.failed_at || b.expired_at || b.cancelled_at || null;
/**
 * A table with no rows is hidden, box and headers, where a sentence beside it says there is nothing to show.
 * @param {string} id the table's id
 * @param {number} rows
 */
export function hideEmpty(id, rows) {
  const table = $(id);
  (table.closest(".table-wrap") || table).classList.toggle("hidden", rows === 0);
}

/** @param {number | undefined} bytes */
export const mb = (bytes) => (bytes ? `${Math.round(bytes / 2 ** 20)} MB` : "—");

/** What the service answered with an error: its HTTP status and its message (an OpenAI-shaped error's). */
export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {string} message
   */
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/**
 * @param {string} path
 * @param {RequestInit & { headers?: Record<string, string> }} [init]
 * @param {{ forbiddenAsNull?: boolean }} [opts] a 403 (the key may not read it) answers null instead of throwing
 * @returns {Promise<any>}
 */
export async function api(path, init, opts) {
  const headers = Object.assign({}, init?.headers, apiKey ? { Authorization: `Bearer ${apiKey}` } : {});
  const res = await fetch(path, Object.assign({ cache: "no-store" }, init, { headers }));
  if (res.status === 401) {
    $("keyform").className = "card show";
    $("empty").style.display = "none";
    throw new ApiError(401, apiKey ? "That API key was not accepted." : "This service needs an API key.");
  }
  $("keyform").className = "card";
  if (res.status === 403 && opts?.forbiddenAsNull) return null;
  const body = res.headers.get("content-type")?.includes("json") ? await res.json() : null;
  if (!res.ok) throw new ApiError(res.status, body?.error?.message || `${path} answered HTTP ${res.status}`);
  return body;
}
