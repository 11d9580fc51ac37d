// Tables in docs/ written from the code (the settings, the error catalogue) sit between two markers; the scripts
// write them and the tests read them back, through these two functions.
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { repoRoot } from "./repo-root.js";

const markers = (name: string) => [`<!-- ${name}:begin -->`, `<!-- ${name}:end -->`] as const;

/** The table between `<!-- name:begin -->` and `<!-- name:end -->` of a page under the repository, trimmed. */
export function readDocTable(page: string, name: string): string {
  const text = readFileSync(path.join(repoRoot, page), "utf8");
  const [begin, end] = markers(name);
  const a = text.indexOf(begin);
  const b = text.indexOf(end);
  if (a < 0 || b < a) throw new Error(`${page} has no ${begin} ... ${end}`);
  return text.slice(a + begin.length, b).trim();
}

/** Replaces that table with `table`. */
export function writeDocTable(page: string, name: string, table: string): void {
  const file = path.join(repoRoot, page);
  const text = readFileSync(file, "utf8");
  const [begin, end] = markers(name);
  const a = text.indexOf(begin);
  const b = text.indexOf(end);
  if (a < 0 || b < a) throw new Error(`${page} has no ${begin} ... ${end}`);
  writeFileSync(file, `${text.slice(0, a + begin.length)}\n${table}\n${text.slice(b)}`);
  console.log(`wrote the ${name} table of ${page}`);
}
