// What a console search matches, the one definition: every word must match; `key=value` is a metadata entry (both
// without regard to case), any other word a part of the id, the input file's name, or a metadata key or value.
// The batch records apply it where they keep the batches (postgres/ in SQL, embedded/ in memory).
import type { Batch } from "./objects.js";

/** The filters of one search, as the records apply them. */
export interface BatchFilter {
  status?: string;
  model?: string;
  endpoint?: string;
  text?: string;
}

export type SearchWord = { kind: "entry"; key: string; value: string } | { kind: "part"; text: string };

/** The search text's words, lower case. */
export function searchWords(text: string | undefined): SearchWord[] {
  return (text ?? "")
    .toLowerCase()
    .split(/\s+/)
    .filter(Boolean)
    .map((word) => {
      const eq = word.indexOf("=");
      return eq > 0 ? { kind: "entry", key: word.slice(0, eq), value: word.slice(eq + 1) } : { kind: "part", text: word };
    });
}

export function matchesFilter(b: Batch, filename: string | null, f: BatchFilter): boolean {
  if (f.status && b.status !== f.status) return false;
  if (f.model && b.model !== f.model) return false;
  if (f.endpoint && b.endpoint !== f.endpoint) return false;
  const metadata = Object.entries(b.metadata ?? {}).map(([k, v]) => [k.toLowerCase(), String(v).toLowerCase()]);
  const haystack = [b.id.toLowerCase(), (filename ?? "").toLowerCase(), ...metadata.flat()];
  return searchWords(f.text).every((w) =>
    w.kind === "entry" ? metadata.some(([k, v]) => k === w.key && v === w.value) : haystack.some((h) => h.includes(w.text)),
  );
}
