// The checker of a fault history, in the spirit of Jepsen's: whatever happened to the processes, each batch that
// ended is judged only by what a client can read, its object and its files. Each custom_id once across the output
// and error files, none lost, none invented; the counts equal the files' lines; the usage equals the sum of the
// output lines' usage, and cached_lines the lines the output marks as answered from the result cache.

export interface ResultLine {
  custom_id: string;
  response?: { status_code?: number; body?: any } | null;
  error?: unknown;
  /** Set on a line answered without running (a repeat, a result cache hit). */
  cached?: string;
}

export interface BatchView {
  id: string;
  status: string;
  request_counts?: { total: number; completed: number; failed: number } | null;
  cached_lines?: number;
  usage?: { input_tokens: number; output_tokens: number; input_tokens_details?: { cached_tokens?: number } } | null;
}

export interface Verdict {
  batch: string;
  lost: number;
  duplicated: number;
  /** Count fields that disagree with the files (completed, failed, total, usage). */
  mismatches: string[];
  /** Output lines read while the batch ran. */
  readEarly?: number;
}

export function checkBatch(b: BatchView, expected: readonly string[], output: ResultLine[], errors: ResultLine[]): Verdict {
  const seen = new Map<string, number>();
  for (const l of [...output, ...errors]) seen.set(l.custom_id, (seen.get(l.custom_id) ?? 0) + 1);
  const want = new Set(expected);
  let duplicated = 0;
  for (const [id, n] of seen) if (n > 1 || !want.has(id)) duplicated += want.has(id) ? n - 1 : n;
  const lost = expected.filter((id) => !seen.has(id)).length;
  const mismatches: string[] = [];
  const c = b.request_counts;
  if (!c) mismatches.push("request_counts missing");
  else {
    if (c.completed !== output.length) mismatches.push(`completed ${c.completed} != ${output.length} output lines`);
    if (c.failed !== errors.length) mismatches.push(`failed ${c.failed} != ${errors.length} error lines`);
    if (c.total !== expected.length) mismatches.push(`total ${c.total} != ${expected.length} requests`);
  }
  const sum = { input: 0, output: 0, cached: 0 };
  for (const l of output) {
    const u = l.response?.body?.usage;
    if (!u) continue;
    sum.input += u.prompt_tokens ?? u.input_tokens ?? 0;
    sum.output += u.completion_tokens ?? u.output_tokens ?? 0;
    // A line not computed had its whole prompt cached, whatever its body's shape says (an embedding's says nothing).
    sum.cached += l.cached
      ? (u.prompt_tokens ?? u.input_tokens ?? 0)
      : (u.prompt_tokens_details?.cached_tokens ?? u.input_tokens_details?.cached_tokens ?? 0);
  }
  const cachedLines = output.filter((l) => l.cached).length;
  if ((b.cached_lines ?? 0) !== cachedLines) mismatches.push(`cached_lines ${b.cached_lines ?? 0} != ${cachedLines} lines marked cached`);
  if (output.length > 0 && b.usage) {
    if (b.usage.input_tokens !== sum.input) mismatches.push(`usage.input_tokens ${b.usage.input_tokens} != ${sum.input}`);
    if (b.usage.output_tokens !== sum.output) mismatches.push(`usage.output_tokens ${b.usage.output_tokens} != ${sum.output}`);
    const cached = b.usage.input_tokens_details?.cached_tokens ?? 0;
    if (cached !== sum.cached) mismatches.push(`usage cached_tokens ${cached} != ${sum.cached}`);
  }
  return { batch: b.id, lost, duplicated, mismatches };
}

/**
 * What a reader of the output while the batch ran got (each read after the lines it had) against the output file:
 * the same lines in the same order, as its start, so no line was read twice or out of place.
 */
export function checkRead(read: readonly string[], outputFile: readonly string[]): string[] {
  const bad: string[] = [];
  if (read.length > outputFile.length) bad.push(`read ${read.length} output lines while it ran, the file has ${outputFile.length}`);
  const at = read.findIndex((l, i) => l !== outputFile[i]);
  if (at >= 0) bad.push(`line ${at + 1} read while it ran differs from the output file's`);
  return bad;
}

/** A verdict as one line for a log or a failed assertion. */
export const describeVerdict = (v: Verdict) =>
  `${v.batch}: lost ${v.lost}, duplicated ${v.duplicated}${v.mismatches.length ? `, ${v.mismatches.join("; ")}` : ""}`;
