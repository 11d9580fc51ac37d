// `npm ci` refuses a lock file that lacks any optional dependency of a package it installs, and the registry
// reachable on our machines serves only the Linux binaries of some (node-llama-cpp, Biome), so a lock refresh
// there silently drops the rest.
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../../testkit/repo-root.js";

describe("package-lock.json", () => {
  it("lists every optional binary package of every installed package, so npm ci accepts it", () => {
    const lock = JSON.parse(readFileSync(path.join(repoRoot, "package-lock.json"), "utf8"));
    const packages = lock.packages as Record<string, { optionalDependencies?: Record<string, string> }>;
    expect(Object.keys(packages["node_modules/node-llama-cpp"].optionalDependencies ?? {}).length).toBeGreaterThan(0);
    const missing = Object.entries(packages).flatMap(([, entry]) =>
      Object.keys(entry.optionalDependencies ?? {}).filter((name) => !packages[`node_modules/${name}`]),
    );
    expect(missing, "re-add these platform-only entries (see .ci/run)").toEqual([]);
  });
});
