// Each folder's README lists its files with the first sentence of their opening comments, and the top README and
// docs/architecture.md draw the floors from the plan: written by `npm run docs:readmes`, checked by
// tests/docs/readmes.unit.test.ts, so neither can leave a file or a floor out.
import { readFileSync } from "node:fs";
import path from "node:path";
import { FLOORS, type ImportEdge } from "./floors.js";
import { repoFiles, repoRoot } from "./repo-root.js";

/** The files a README lists: code and the settings files users copy, not data, styles or native patches. */
const LISTED = /\.(ts|mts|mjs|js|sh|py|yaml)$/;

/** Files under `folder` (relative to the repository), `/`-separated, relative to that folder, sorted. */
export function folderFiles(folder: string): string[] {
  const listed = (name: string) => LISTED.test(name) && !name.endsWith(".d.ts") && !name.endsWith(".test.ts");
  return repoFiles(folder, listed)
    .map((file) => file.slice(folder.length + 1))
    .sort();
}

/** The comment a file opens with (after a shebang and `// @ts-check`), as one line of prose. */
export function openingComment(text: string): string {
  const lines = text.split("\n");
  const prose: string[] = [];
  let i = lines[0]?.startsWith("#!") ? 1 : 0;
  if (lines[i]?.trim() === "// @ts-check") i++;
  if (lines[i]?.startsWith('"""')) {
    for (let line = lines[i].slice(3); i < lines.length; line = lines[++i] ?? "") {
      const end = line.indexOf('"""');
      prose.push(end >= 0 ? line.slice(0, end) : line);
      if (end >= 0) break;
    }
  } else {
    for (; i < lines.length && /^\s*(\/\/|#(?!!)|\/\*\*?|\*(?!\/))/.test(lines[i]); i++) {
      prose.push(lines[i].replace(/^\s*(\/\/|#|\/\*\*?|\*)\s?/, ""));
    }
  }
  return prose.join(" ").replace(/\s+/g, " ").trim();
}

/** The first sentence of that comment: up to the first full stop that ends a word ("e.g." and "i.e." do not). */
export function firstSentence(comment: string): string {
  for (const m of comment.matchAll(/[^.\s]\.(?=\s|$)/g)) {
    const end = m.index + 2;
    if (!/\b(e\.g|i\.e)\.$/.test(comment.slice(0, end))) return comment.slice(0, end);
  }
  return comment;
}

/** The table a folder's README carries between `<!-- files:begin -->` and `<!-- files:end -->`. */
export function filesTable(folder: string): string {
  const rows = folderFiles(folder).map((file) => {
    const what = firstSentence(openingComment(readFileSync(path.join(repoRoot, folder, file), "utf8")));
    return `| \`${file}\` | ${what.replaceAll("|", "\\|")} |`;
  });
  return ["| file | what it is |", "|---|---|", ...rows].join("\n");
}

/** The folders whose READMEs list their files: every placed folder but tests/, whose files name what they test. */
export const listedFolders = (): string[] => [...FLOORS.flat().filter((folder) => folder !== "tests"), "tests/helpers"];

/** Where a folder's list is kept: its own README, or for tests/helpers the tests' README. */
export const readmeOf = (folder: string): { page: string; table: string } =>
  folder === "tests/helpers" ? { page: "tests/README.md", table: "helpers" } : { page: `${folder}/README.md`, table: "files" };

/** A folder's title, from its README's heading `# folder/: what it is`. */
function title(folder: string): string {
  const heading = readFileSync(path.join(repoRoot, folder, "README.md"), "utf8").split("\n", 1)[0];
  const m = /^# [\w-]+\/: (.+)$/.exec(heading);
  if (!m) throw new Error(`${folder}/README.md opens with "${heading}", not "# ${folder}/: what it holds"`);
  return m[1];
}

/** The floors, top to bottom, each folder with its README's title: the picture in README.md and architecture.md. */
export function floorsPicture(): string {
  const width = Math.max(...FLOORS.flat().map((f) => f.length)) + 4;
  const rule = ` ${"─".repeat(width - 1)}`;
  const floors = FLOORS.map((folders) => folders.map((f) => ` ${`${f}/`.padEnd(width)}${title(f)}`).join("\n"));
  return ["```", floors.join(`\n${rule}\n`), "```"].join("\n");
}

/** What a folder imports and what imports it, from `edges` (importEdges()): the line under its list of files. */
export function importsLine(folder: string, edges: readonly ImportEdge[]): string {
  const top = (file: string) => file.split("/", 1)[0];
  const order = FLOORS.flat();
  const names = (folders: Set<string>) =>
    [...folders]
      .sort((a, b) => order.indexOf(a) - order.indexOf(b))
      // A root file (vitest.config.ts) is named as it is, a folder with its slash.
      .map((f) => (order.includes(f) ? `\`${f}/\`` : `\`${f}\``))
      .join(", ") || "nothing";
  const imports = new Set(edges.filter((e) => top(e.from) === folder && top(e.to) !== folder).map((e) => top(e.to)));
  const importedBy = new Set(edges.filter((e) => top(e.to) === folder && top(e.from) !== folder).map((e) => top(e.from)));
  return `**Imports** ${names(imports)}. **Imported by** ${names(importedBy)}.`;
}
