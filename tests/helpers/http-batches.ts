// The tests' names for testkit's batch client (testkit/batch-client.ts, shared with the bench and chaos), with
// headers passed positionally as the tests always have, plus the checks that read a batch's folder directly.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import {
  createBatch as create,
  getBatch as get,
  type Headers,
  isFinal,
  pollBatch as poll,
  uploadText,
} from "../../testkit/batch-client.js";

export type { Headers };

export const uploadJsonl = (baseUrl: string, content: string, headers: Headers = {}, filename = "input.jsonl") =>
  uploadText(baseUrl, content, { headers, filename });

/** POST /v1/batches for /v1/completions; returns the status and body whatever they are. */
export const createBatch = (baseUrl: string, inputFileId: string, headers: Headers = {}) => create(baseUrl, inputFileId, { headers });

export const getBatch = (baseUrl: string, id: string, headers: Headers = {}): Promise<any> => get(baseUrl, id, { headers });

/** Polls until `done` holds for the batch (the run is event driven; this only observes it). */
export const pollBatch = (
  baseUrl: string,
  id: string,
  done: (b: any) => boolean,
  timeoutMs = 30_000,
  headers: Headers = {},
): Promise<any> => poll(baseUrl, id, done, { timeoutMs, headers });

export { isFinal };

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
