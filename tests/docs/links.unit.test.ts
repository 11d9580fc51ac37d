// The documentation points only at what exists: every relative link (and its #anchor), every file path named in
// backticks, every folder named so (`batches/`) and every path that begins at one of the repository's top folders,
// in backticks or not (`tests/e2e/`, engine/load/threads.ts), in README.md, CONTRIBUTING.md, docs/ (its guides/ too) and the folder
// READMEs resolves in the repository.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../../testkit/repo-root.js";
import { anchors, markdownFiles, SKIP_DIRS } from "../helpers/markdown.js";

/** What a path in backticks looks like: folders and a file with a known extension, no placeholders. */
const NAMED_PATH = /^(?:\.\.\/)*[\w.-]+(?:\/[\w.-]+)+\.(?:ts|js|mjs|md|ya?ml|json|sh|sql|css|html|png|svg|patch)$/;
/** Not in a clone: what a build, a bench run or the system writes (models/ is MODELS_DIR's default). */
const NOT_IN_REPO = /^(?:dist|node_modules|bench\/results|models\/|\/|~)/;
/** A file named without its folder: it must exist somewhere in the repository. */
const BARE_FILE = /^[\w-]+(?:\.[\w-]+)*\.(?:ts|js|mjs|sql|sh|patch)$/;

/** The names of the repository's files, and of its folders (each with a trailing /). */
function basenames(): Set<string> {
  const out = new Set<string>();
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (SKIP_DIRS.has(e.name)) continue;
      if (e.isDirectory()) {
        out.add(`${e.name}/`);
        walk(path.join(dir, e.name));
      } else out.add(e.name);
    }
  };
  walk(repoRoot);
  return out;
}
const FILES = basenames();

/** The repository's top folders: a path that begins at one of them names something in the clone. */
const TOP = readdirSync(repoRoot, { withFileTypes: true })
  .filter((e) => e.isDirectory() && !SKIP_DIRS.has(e.name) && !e.name.startsWith("."))
  .map((e) => e.name);
/** A path from a top folder anywhere in the text, in backticks or not (not inside a URL or another path). */
const FROM_TOP = new RegExp(`(?<![\\w./:@-])((?:${TOP.join("|")})/[\\w./-]*)`, "g");
/** A folder named in backticks: `batches/`, `engine/load/` (not a host, a file name pattern or a setting's folder). */
const NAMED_FOLDER = /^(?:\.\.\/)*[\w-]+(?:\/[\w-]+)*\/$/;
/** What a reader makes, named as an example: an overlay of their own. */
const READERS_OWN = /^k8s\/overlays\/mine\b/;

/** Whether a path exists from the repository's root or from the page's folder, as a file or (ending in /) a folder. */
function resolves(named: string, dir: string): boolean {
  const folder = named.endsWith("/");
  return [path.join(repoRoot, named), path.resolve(dir, named)].some((p) => existsSync(p) && (folder ? statSync(p).isDirectory() : true));
}

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
      for (const m of text.matchAll(/`([^`\s]+)`/g)) {
        const named = m[1];
        if (!NAMED_FOLDER.test(named) || NOT_IN_REPO.test(named)) continue;
        // A folder named alone (`routes/`) is one of the repository's, wherever it sits; a longer path resolves.
        const found = named.indexOf("/") === named.length - 1 ? FILES.has(named) : resolves(named, dir);
        if (!found) broken.push(`folder ${named}`);
      }
      for (const m of text.matchAll(FROM_TOP)) {
        const named = m[1].replace(/[.,]+$/, "");
        // A pattern or a placeholder goes on past the path: docker/prometheus*.yml, BATCH_DIR/<batch_id>.
        if (/[*<{]/.test(text.charAt((m.index ?? 0) + m[0].length))) continue;
        if (NOT_IN_REPO.test(named) || READERS_OWN.test(named)) continue;
        if (!resolves(named, repoRoot) && !resolves(named, dir)) broken.push(`path ${named}`);
      }
      expect(broken).toEqual([]);
    });
  }
});
