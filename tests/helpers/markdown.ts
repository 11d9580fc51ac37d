// The documentation as the docs tests read it: which pages there are, the anchors GitHub gives their headings, a
// section by its anchor and a table's rows by their label.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { repoRoot } from "../../testkit/repo-root.js";

export const SKIP_DIRS = new Set(["node_modules", ".git", "dist", ".venv", ".scratch"]);

/** README.md, CONTRIBUTING.md, docs/*.md and every folder's README.md, two floors deep. */
export function markdownFiles(): string[] {
  const out = ["README.md", "CONTRIBUTING.md"];
  for (const dir of ["docs", "docs/guides"])
    for (const f of readdirSync(path.join(repoRoot, dir))) if (f.endsWith(".md")) out.push(`${dir}/${f}`);
  const walk = (dir: string, depth: number) => {
    for (const e of readdirSync(path.join(repoRoot, dir), { withFileTypes: true })) {
      if (!e.isDirectory() || SKIP_DIRS.has(e.name) || e.name.startsWith(".")) continue;
      const sub = dir ? `${dir}/${e.name}` : e.name;
      if (existsSync(path.join(repoRoot, sub, "README.md"))) out.push(`${sub}/README.md`);
      if (depth < 2) walk(sub, depth + 1);
    }
  };
  walk("", 0);
  return [...new Set(out)];
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes. */
export const anchorOf = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\- _]/gu, "")
    .replace(/ /g, "-");

/** The anchors of a page's headings (those inside code blocks are not headings). */
export function anchors(file: string): Set<string> {
  const text = readFileSync(file, "utf8").replace(/```[\s\S]*?```/g, "");
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => anchorOf(m[1])));
}

/** The part of a page a link points at: the section under the anchor's heading (to the next heading of its level or
 * above), or the whole page without an anchor. */
export function sectionOf(text: string, anchor: string | undefined): string | undefined {
  if (!anchor) return text;
  const headings = [...text.matchAll(/^(#{1,6}) (.+)$/gm)];
  const at = headings.findIndex((h) => anchorOf(h[2]) === anchor);
  if (at < 0) return undefined;
  const level = headings[at][1].length;
  const next = headings.slice(at + 1).find((h) => h[1].length <= level);
  return text.slice(headings[at].index, next?.index ?? text.length);
}

/** The table rows of a text whose first cell begins with `label` (as a whole word: "families-6" is not "families-64"). */
export function rowsLabelled(text: string, label: string): string[] {
  const rows = [...text.matchAll(/^\|(.*)\|$/gm)].map((m) => m[1].replaceAll("**", ""));
  return rows.filter((row) => {
    const first = row.split("|")[0].trim();
    return first.startsWith(label) && !/[\w-]/.test(first.charAt(label.length));
  });
}
