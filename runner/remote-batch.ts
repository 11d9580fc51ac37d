// A dataset job's request lines run on a server through OpenAI's documented Files and Batches calls (upload,
// create, retrieve, file content), so the same job runs against this service in either mode or any server that
// implements them. The batch's id is kept in the stage's state, so a rerun follows it instead of submitting again.
// Where the server has this service's output reads (GET /v1/batches/{id}/output), the output file fills while the
// batch runs: its first results can be checked long before the end.
import { createWriteStream, openAsBlob } from "node:fs";
import { appendFile, writeFile } from "node:fs/promises";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { setTimeout as sleep } from "node:timers/promises";
import type { Endpoint } from "../openai/backend.js";
import { readJsonFile, writeJsonAtomic } from "../stores/atomic-json.js";
import type { OfflineRunDeps } from "./run-offline.js";

export interface RemoteRun {
  requests: string;
  output: string;
  errors: string;
  stateFile: string;
  endpoint: Endpoint;
  remote: { url: string; apiKey?: string };
  pollMs?: number;
}

interface Batch {
  id: string;
  status: string;
  output_file_id?: string | null;
  error_file_id?: string | null;
  request_counts?: { total: number; completed: number; failed: number };
  /** This service's pause (an extension): the batch waits for a resume, its deadline still running. */
  paused_at?: number | null;
  errors?: { data?: Array<{ code?: string; message?: string; line?: number | null }> } | null;
}

const FINAL = new Set(["completed", "failed", "expired", "cancelled"]);

/** The API base as the official clients take it: `http://host:8000` and `http://host:8000/v1` both name `/v1`. */
export function apiBase(url: string): string {
  const u = new URL(url);
  if (u.pathname === "/" || u.pathname === "") u.pathname = "/v1";
  return u.toString().replace(/\/+$/, "");
}

type Call = <T>(method: string, route: string, body?: FormData | object) => Promise<T>;

/** The server's API: a call's JSON answer, or an error with the server's message (OpenAI's shape, else its text). */
function apiClient(base: string, headers: Record<string, string>, signal?: AbortSignal): Call {
  return async <T>(method: string, route: string, body?: FormData | object): Promise<T> => {
    const init: RequestInit = { method, headers: { ...headers }, ...(signal ? { signal } : {}) };
    if (body instanceof FormData) init.body = body;
    else if (body) {
      init.body = JSON.stringify(body);
      (init.headers as Record<string, string>)["content-type"] = "application/json";
    }
    const res = await fetch(`${base}${route}`, init);
    const text = await res.text();
    if (!res.ok) {
      const message = (() => {
        try {
          return (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? text;
        } catch {
          return text;
        }
      })();
      throw new Error(`${method} ${base}${route}: HTTP ${res.status}: ${message.slice(0, 300)}`);
    }
    return JSON.parse(text) as T;
  };
}

/** Where a stage's batch runs on a server, and what has been read of its output so far. */
interface Remote {
  run: RemoteRun;
  deps: OfflineRunDeps;
  base: string;
  headers: Record<string, string>;
  call: Call;
  /** Output lines appended while the batch ran; null: the server has no output reads. */
  outputRead?: number | null;
}

export async function runRemoteBatch(run: RemoteRun, deps: OfflineRunDeps): Promise<number> {
  const base = apiBase(run.remote.url);
  const headers: Record<string, string> = run.remote.apiKey ? { authorization: `Bearer ${run.remote.apiKey}` } : {};
  const r: Remote = { run, deps, base, headers, call: apiClient(base, headers, deps.signal) };
  let batch: Batch;
  try {
    batch = await submitOrFollow(r);
    batch = await waitForEnd(r, batch);
  } catch (err) {
    if (deps.signal?.aborted) {
      deps.stderr.write(`stopped following; the batch runs on: run the same command again to follow it and join its results\n`);
      return 130;
    }
    deps.stderr.write(`error: ${(err as Error).message}\n`);
    return 1;
  }
  if (batch.status === "failed" && !batch.output_file_id && !batch.error_file_id) {
    const e = batch.errors?.data?.[0];
    deps.stderr.write(`error: ${batch.id} failed: ${e ? `${e.code}: ${e.message}` : "no reason given"}\n`);
    return 1;
  }
  try {
    // Downloaded whole (streamed to disk): its lines start with those read while it ran, in the same order.
    await saveContent(r, batch.output_file_id, run.output);
    await saveContent(r, batch.error_file_id, run.errors);
  } catch (err) {
    deps.stderr.write(`error: ${(err as Error).message}\n`);
    return 1;
  }
  return 0;
}

/** The batch this stage submitted before (its id kept in the state), else the request lines submitted now. */
async function submitOrFollow(r: Remote): Promise<Batch> {
  const { run, deps, call, base } = r;
  const state = ((await readJsonFile(run.stateFile)) ?? {}) as { remoteBatch?: string };
  if (state.remoteBatch) {
    const batch = await call<Batch>("GET", `/batches/${state.remoteBatch}`);
    deps.stderr.write(`following ${batch.id} on ${base} (${batch.status})\n`);
    return batch;
  }
  const form = new FormData();
  form.set("purpose", "batch");
  form.set("file", await openAsBlob(run.requests), "requests.jsonl");
  const file = await call<{ id: string }>("POST", "/files", form);
  const batch = await call<Batch>("POST", "/batches", { input_file_id: file.id, endpoint: run.endpoint, completion_window: "24h" });
  await writeJsonAtomic(run.stateFile, { ...state, remoteBatch: batch.id });
  deps.stderr.write(`submitted ${batch.id} to ${base}\n`);
  return batch;
}

/** Polls the batch to its end, a line on stderr each time its state changes, its output read as it fills. */
async function waitForEnd(r: Remote, start: Batch): Promise<Batch> {
  const { run, deps, call } = r;
  let batch = start;
  let shown = "";
  await writeFile(run.output, "");
  while (!FINAL.has(batch.status)) {
    await sleep(run.pollMs ?? 2000, undefined, { signal: deps.signal });
    batch = await call<Batch>("GET", `/batches/${batch.id}`);
    await follow(r, batch.id);
    const c = batch.request_counts;
    const paused = batch.paused_at ? " (paused: it goes on once resumed, POST /v1/batches/{id}/resume)" : "";
    const sofar = r.outputRead === undefined ? "" : `; ${r.outputRead} results so far in ${run.output}`;
    const line = `${batch.id}: ${batch.status}${paused}${c ? `, ${c.completed + c.failed} of ${c.total} done (${c.failed} failed)` : ""}${sofar}`;
    if (line !== shown) deps.stderr.write(`${line}\n`);
    shown = line;
  }
  return batch;
}

/**
 * Appends the output lines committed since the last read (whole lines only). A server without output reads
 * (404) is not asked again.
 */
async function follow(r: Remote, id: string): Promise<void> {
  if (r.outputRead === null) return;
  const res = await fetch(`${r.base}/batches/${id}/output?after=${r.outputRead ?? 0}`, { headers: r.headers, signal: r.deps.signal }).catch(
    () => undefined,
  );
  if (res?.status === 404 || res?.status === 405) r.outputRead = null;
  if (!res?.ok) return;
  const text = await res.text().catch(() => "");
  const whole = text.slice(0, text.lastIndexOf("\n") + 1);
  await appendFile(r.run.output, whole);
  r.outputRead = (r.outputRead ?? 0) + whole.split("\n").length - 1;
}

/** A result file streamed to disk, never whole in memory; none is an empty file. */
async function saveContent(r: Remote, id: string | null | undefined, file: string): Promise<void> {
  if (!id) return writeFile(file, "");
  const res = await fetch(`${r.base}/files/${id}/content`, { headers: r.headers, signal: r.deps.signal });
  if (!res.ok || !res.body) throw new Error(`GET ${r.base}/files/${id}/content: HTTP ${res.status}`);
  await pipeline(Readable.fromWeb(res.body as import("node:stream/web").ReadableStream), createWriteStream(file));
}
