// Tables in docs/ written from the code (the settings, the error catalogue) sit between two markers; the scripts
// write them and the tests read them back, through these two functions.
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { repoRoot } from "./repo-root.js";

const markers = (name: string) => [`<!-- ${name}:begin -->`, `<!-- ${name}:end -->`] as const;

/** The page's text and where its table named `name` lies: after the begin marker, up to the end marker. */
function locate(page: string, name: string): { file: string; text: string; from: number; to: number } {
  const file = path.join(repoRoot, page);
  const text = readFileSync(file, "utf8");
  const [begin, end] = markers(name);
  const a = text.indexOf(begin);
  const b = text.indexOf(end);
  if (a < 0 || b < a) throw new Error(`${page} has no ${begin} ... ${end}`);
  return { file, text, from: a + begin.length, to: b };
}

/** The table between `<!-- name:begin -->` and `<!-- name:end -->` of a page under the repository, trimmed. */
export function readDocTable(page: string, name: string): string {
  const { text, from, to } = locate(page, name);
  return text.slice(from, to).trim();
}

/** Replaces that table with `table`. */
export function writeDocTable(page: string, name: string, table: string): void {
  const { file, text, from, to } = locate(page, name);
  writeFileSync(file, `${text.slice(0, from)}\n${table}\n${text.slice(to)}`);
  console.log(`wrote the ${name} table of ${page}`);
}
