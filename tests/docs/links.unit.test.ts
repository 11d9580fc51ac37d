// The documentation points only at what exists: every relative link (and its #anchor) and every file path named
// in backticks in README.md, docs/ (its guides/ too) and the folder READMEs resolves in the repository.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../../testkit/repo-root.js";

const SKIP_DIRS = new Set(["node_modules", ".git", "dist", ".venv", ".scratch"]);

function markdownFiles(): string[] {
  const out = ["README.md"];
  for (const dir of ["docs", "docs/guides"]) {
    for (const f of readdirSync(path.join(repoRoot, dir))) if (f.endsWith(".md")) out.push(`${dir}/${f}`);
  }
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
const anchorOf = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\- _]/gu, "")
    .replace(/ /g, "-");

function anchors(file: string): Set<string> {
  const text = readFileSync(file, "utf8").replace(/```[\s\S]*?```/g, "");
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => anchorOf(m[1])));
}

/** What a path in backticks looks like: folders and a file with a known extension, no placeholders. */
const NAMED_PATH = /^(?:\.\.\/)*[\w.-]+(?:\/[\w.-]+)+\.(?:ts|js|mjs|md|ya?ml|json|sh|sql|css|html|png|svg|patch)$/;
/** Not in a clone: what a build, a bench run or the system writes. */
const NOT_IN_REPO = /^(?:dist|node_modules|bench\/results|\/|~)/;
/** A file named without its folder: it must exist somewhere in the repository. */
const BARE_FILE = /^[\w-]+(?:\.[\w-]+)*\.(?:ts|js|mjs|sql|sh|patch)$/;

function basenames(): Set<string> {
  const out = new Set<string>();
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (SKIP_DIRS.has(e.name)) continue;
      if (e.isDirectory()) walk(path.join(dir, e.name));
      else out.add(e.name);
    }
  };
  walk(repoRoot);
  return out;
}
const FILES = basenames();

describe("documentation links and paths", () => {
  for (const doc of markdownFiles()) {
    it(`${doc}: every relative link and named file exists`, () => {
      const abs = path.join(repoRoot, doc);
      const dir = path.dirname(abs);
      const text = readFileSync(abs, "utf8");
      const broken: string[] = [];
      const links = [...text.matchAll(/\]\(([^)\s]+)\)/g), ...text.matchAll(/src="([^"]+)"/g)].map((m) => m[1]);
      for (const link of links) {
        if (/^[a-z]+:/i.test(link)) continue;
        const [target, fragment] = link.split("#");
        const file = target ? path.resolve(dir, target) : abs;
        if (!existsSync(file)) {
          broken.push(`link ${link}`);
          continue;
        }
        if (fragment && file.endsWith(".md") && !anchors(file).has(fragment)) broken.push(`anchor ${link}`);
      }
      for (const m of text.matchAll(/`([^`\s]+)`/g)) {
        const named = m[1];
        if (BARE_FILE.test(named)) {
          if (!FILES.has(named)) broken.push(`file ${named}`);
          continue;
        }
        if (!NAMED_PATH.test(named) || NOT_IN_REPO.test(named)) continue;
        const found = [path.join(repoRoot, named), path.resolve(dir, named)].some((p) => existsSync(p) && statSync(p).isFile());
        if (!found) broken.push(`path ${named}`);
      }
      expect(broken).toEqual([]);
    });
  }
});
