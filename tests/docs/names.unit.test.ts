// The names the documentation gives exist: every `npm run <script>` is one of package.json's scripts, and every
// setting or variable named in capitals (`MAX_QUEUE_DEPTH`, `OBI_TEST_NO_SHARED`) is read somewhere in the code, the
// scripts or the manifests, so a renamed or removed setting cannot live on in a page.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../../testkit/repo-root.js";
import { markdownFiles, SKIP_DIRS } from "../helpers/markdown.js";

const scripts = new Set(Object.keys(JSON.parse(readFileSync(path.join(repoRoot, "package.json"), "utf8")).scripts));

/** Every file of the repository but the documentation: what a name in capitals must be read in. */
function codeText(): string {
  const parts: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (SKIP_DIRS.has(e.name) || e.name === ".git") continue;
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (!/\.(md|png|svg|gguf|parquet|jpg)$/.test(e.name)) parts.push(readFileSync(p, "utf8"));
    }
  };
  walk(repoRoot);
  return parts.join("\n");
}
const CODE = codeText();

/** A variable's name in backticks, maybe with its value: `MAX_QUEUE_DEPTH`, `KV_UNIFIED=auto`. */
const VARIABLE = /`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?:=[^`]*)?`/g;
/** A script as a page runs it: npm run docs:api, npm run -s format. */
const SCRIPT = /npm run (?:-s )?([\w-]+(?::[\w-]+)?)/g;

describe("names the documentation gives", () => {
  it("reads the names as a page gives them", () => {
    const text = "`npm run docs:api`, npm run chaos: a table; `KV_UNIFIED=auto` and `MODEL_PATH`, not `GET` nor `A_`";
    expect([...text.matchAll(VARIABLE)].map((m) => m[1])).toEqual(["KV_UNIFIED", "MODEL_PATH"]);
    expect([...text.matchAll(SCRIPT)].map((m) => m[1])).toEqual(["docs:api", "chaos"]);
  });

  for (const doc of markdownFiles()) {
    it(`${doc}: every npm script and every variable it names exists`, () => {
      const text = readFileSync(path.join(repoRoot, doc), "utf8");
      const missing: string[] = [];
      for (const m of text.matchAll(SCRIPT)) if (!scripts.has(m[1])) missing.push(`npm run ${m[1]}`);
      for (const m of text.matchAll(VARIABLE)) if (!new RegExp(`\\b${m[1]}\\b`).test(CODE)) missing.push(m[1]);
      expect([...new Set(missing)]).toEqual([]);
    });
  }
});
