// A plain-fetch client for the batch API, for tests that drive a server over real HTTP (a child
// process, or many concurrent clients), plus the checks those tests share.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";

export type Headers = Record<string, string>;

/** `n` /v1/completions lines with custom_ids `${prefix}-0`..`${prefix}-(n-1)`. */
export function completionJsonl(
  n: number,
  prefix: string,
  opts: { maxTokens?: number; temperature?: number; model?: string } = {},
): string {
  let out = "";
  for (let i = 0; i < n; i++) {
    const body = {
      ...(opts.model ? { model: opts.model } : {}),
      prompt: `Once upon a time, story ${prefix} ${i}:`,
      max_tokens: opts.maxTokens ?? 8,
      temperature: opts.temperature ?? 0,
    };
    out += `${JSON.stringify({ custom_id: `${prefix}-${i}`, method: "POST", url: "/v1/completions", body })}\n`;
  }
  return out;
}

/** The custom_ids completionJsonl(n, prefix) writes. */
export const customIds = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

export async function uploadJsonl(baseUrl: string, content: string, headers: Headers = {}, filename = "input.jsonl"): Promise<any> {
  const form = new FormData();
  form.append("purpose", "batch");
  form.append("file", new Blob([content]), filename);
  const res = await fetch(`${baseUrl}/v1/files`, { method: "POST", body: form, headers });
  if (res.status !== 200) throw new Error(`upload answered ${res.status}: ${await res.text()}`);
  return res.json();
}

/** POST /v1/batches; returns the status and body whatever they are. */
export async function createBatch(baseUrl: string, inputFileId: string, headers: Headers = {}): Promise<{ status: number; body: any }> {
  const res = await fetch(`${baseUrl}/v1/batches`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ input_file_id: inputFileId, endpoint: "/v1/completions", completion_window: "24h" }),
  });
  return { status: res.status, body: await res.json() };
}

export async function getBatch(baseUrl: string, id: string, headers: Headers = {}): Promise<any> {
  const res = await fetch(`${baseUrl}/v1/batches/${id}`, { headers });
  if (res.status !== 200) throw new Error(`GET batch ${id} answered ${res.status}`);
  return res.json();
}

/** Polls until `until` holds for the batch (the run is event driven; this only observes it). */
export async function pollBatch(
  baseUrl: string,
  id: string,
  until: (b: any) => boolean,
  timeoutMs = 30_000,
  headers: Headers = {},
): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const b = await getBatch(baseUrl, id, headers);
    if (until(b)) return b;
    if (Date.now() > deadline) throw new Error(`batch ${id} did not get there in ${timeoutMs} ms: ${JSON.stringify(b)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export const isFinal = (b: any) => ["completed", "failed", "expired", "cancelled"].includes(b.status);

/** Whole result lines of a batch, read straight from its folder (a line torn by a kill is left out). */
export function resultLines(batchDir: string, id: string): { output: any[]; errors: any[] } {
  const read = (name: string) => {
    let text = "";
    try {
      text = readFileSync(path.join(batchDir, id, name), "utf8");
    } catch {
      return [];
    }
    const lines = text.split("\n");
    lines.pop(); // what follows the last newline: "" or a torn line
    return lines.filter((l) => l !== "").map((l) => JSON.parse(l));
  };
  return { output: read("output.jsonl"), errors: read("errors.jsonl") };
}

/** custom_ids across a batch's output and error files that appear more than once, and those missing. */
export function accountIds(batchDir: string, id: string, expected: string[]): { duplicated: string[]; missing: string[]; lines: number } {
  const { output, errors } = resultLines(batchDir, id);
  const seen = new Map<string, number>();
  for (const l of [...output, ...errors]) seen.set(l.custom_id, (seen.get(l.custom_id) ?? 0) + 1);
  return {
    duplicated: [...seen].filter(([, n]) => n > 1).map(([k]) => k),
    missing: expected.filter((k) => !seen.has(k)),
    lines: output.length + errors.length,
  };
}

/** Temp files of atomic writes anywhere in BATCH_DIR's batch folders and files/. */
export function tmpFiles(batchDir: string): string[] {
  return readdirSync(batchDir, { recursive: true, encoding: "utf8" }).filter((p) => p.endsWith(".tmp"));
}

/** The service's JSON log lines (pino) from a process's output; other lines are skipped. */
export function logLines(output: string): any[] {
  return output
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => {
      try {
        return JSON.parse(l);
      } catch {
        return null;
      }
    })
    .filter(Boolean);
}
