// A clean `npm install` prints no install-script warning for a user to puzzle over: every installed dependency that
// has an install script is decided in package.json's allowScripts (npm 11's field; the README says why none runs).
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { expect, it } from "vitest";
import { repoRoot } from "../../testkit/repo-root.js";

const INSTALL_SCRIPTS = ["preinstall", "install", "postinstall"];

/** Every package under a node_modules folder, nested ones included. */
function packages(folder: string): Array<{ name: string; scripts: Record<string, string> }> {
  if (!existsSync(folder)) return [];
  const found: Array<{ name: string; scripts: Record<string, string> }> = [];
  for (const entry of readdirSync(folder)) {
    if (entry.startsWith(".")) continue;
    const dirs = entry.startsWith("@") ? readdirSync(path.join(folder, entry)).map((d) => path.join(entry, d)) : [entry];
    for (const dir of dirs) {
      const manifest = path.join(folder, dir, "package.json");
      if (!existsSync(manifest)) continue;
      const pkg = JSON.parse(readFileSync(manifest, "utf8")) as { name?: string; scripts?: Record<string, string> };
      found.push({ name: pkg.name ?? dir, scripts: pkg.scripts ?? {} });
      found.push(...packages(path.join(folder, dir, "node_modules")));
    }
  }
  return found;
}

it("decides every installed dependency's install script in package.json's allowScripts", () => {
  const { allowScripts = {} } = JSON.parse(readFileSync(path.join(repoRoot, "package.json"), "utf8")) as {
    allowScripts?: Record<string, boolean>;
  };
  const withScripts = packages(path.join(repoRoot, "node_modules")).filter((p) => INSTALL_SCRIPTS.some((s) => s in p.scripts));
  expect(withScripts.length).toBeGreaterThan(0);
  const undecided = [...new Set(withScripts.map((p) => p.name))].filter((name) => !(name in allowScripts));
  expect(undecided, "decide them in package.json's allowScripts (npm install-scripts approve|deny)").toEqual([]);
});
