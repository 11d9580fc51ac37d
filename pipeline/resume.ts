// Picking a batch up after a restart: what is already on disk, and the cleanup of a line a crash tore.
import { type FileHandle, open } from "node:fs/promises";
import { readJsonlLines } from "./jsonl.js";
import type { Progress } from "./types.js";
import { emptyUsage } from "./usage.js";

export interface DoneScan extends Progress {
  /** custom_ids with a line in the output or error file. */
  done: Set<string>;
}

/**
 * Reads the output and error files of an interrupted run. Output lines count as completed and add
 * their usage; error-file lines count as failed. Unparseable lines (a torn tail) are skipped, and
 * missing files read as empty (null: no error file counts). Call repairTornTail on both files before appending to
 * them again.
 */
export function scanDone(outputPath: string, errorPath: string | null): Promise<DoneScan> {
  return scanResults(resultLines(outputPath), errorPath === null ? parsed([]) : resultLines(errorPath));
}

/** The same count over result lines already in memory (a checkpoint's part): the text of whole JSONL lines. */
export function scanResultText(output: string, errors: string): Promise<DoneScan> {
  return scanResults(parsed(output.split("\n")), parsed(errors.split("\n")));
}

async function scanResults(output: AsyncIterable<ResultLine>, errors: AsyncIterable<ResultLine>): Promise<DoneScan> {
  const scan: DoneScan = { done: new Set(), completed: 0, failed: 0, usage: emptyUsage(), cached: { lines: 0, outputTokens: 0 } };
  for await (const line of output) {
    if (scan.done.has(line.custom_id)) continue;
    scan.done.add(line.custom_id);
    scan.completed++;
    const u = line.response?.body?.usage;
    const cached = line.cached === "duplicate" || line.cached === "hit";
    if (u && typeof u === "object") {
      scan.usage.promptTokens += num(u.prompt_tokens);
      scan.usage.completionTokens += num(u.completion_tokens);
      // An answer not computed had all its prompt cached, whatever its body's shape can say (an embedding's cannot).
      scan.usage.cachedTokens += cached ? num(u.prompt_tokens) : num(u.prompt_tokens_details?.cached_tokens);
    }
    if (cached) {
      scan.cached!.lines++;
      scan.cached!.outputTokens += num(u?.completion_tokens);
    }
  }
  for await (const line of errors) {
    if (scan.done.has(line.custom_id)) continue;
    scan.done.add(line.custom_id);
    scan.failed++;
  }
  return scan;
}

const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);

type ResultLine = { custom_id: string; response?: any; cached?: unknown };

/** Lines that parse as a result (with a custom_id); anything else (a torn tail, a blank) is skipped. */
async function* parsed(texts: Iterable<string> | AsyncIterable<string>): AsyncGenerator<ResultLine> {
  for await (const text of texts) {
    let v: any;
    try {
      v = JSON.parse(text);
    } catch {
      continue;
    }
    if (v && typeof v.custom_id === "string") yield v;
  }
}

async function* resultLines(path: string): AsyncGenerator<ResultLine> {
  async function* texts() {
    for await (const line of readJsonlLines(path)) yield line.text;
  }
  try {
    yield* parsed(texts());
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
}

/**
 * A crash mid-append can leave a last line without its "\n". Cuts the file back to just after
 * the last "\n" (to empty if there is none). Returns the bytes removed; 0 for a missing file.
 */
export async function repairTornTail(path: string): Promise<number> {
  let fh: FileHandle;
  try {
    fh = await open(path, "r+");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return 0;
    throw err;
  }
  try {
    const size = (await fh.stat()).size;
    const chunk = Buffer.alloc(64 * 1024);
    let end = size;
    while (end > 0) {
      const start = Math.max(0, end - chunk.length);
      const { bytesRead } = await fh.read(chunk, 0, end - start, start);
      const nl = chunk.subarray(0, bytesRead).lastIndexOf(0x0a);
      if (nl !== -1) {
        const keep = start + nl + 1;
        if (keep < size) await fh.truncate(keep);
        return size - keep;
      }
      end = start;
    }
    if (size > 0) await fh.truncate(0);
    return size;
  } finally {
    await fh.close();
  }
}
