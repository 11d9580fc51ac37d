// `npm ci` refuses a lock file that lacks any optional dependency of node-llama-cpp, and the registry
// reachable on our machines serves only the Linux ones, so a lock refresh there silently drops the rest.
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../helpers/process.js";

describe("package-lock.json", () => {
  it("lists every optional binary package of node-llama-cpp, so npm ci accepts it", () => {
    const lock = JSON.parse(readFileSync(path.join(repoRoot, "package-lock.json"), "utf8"));
    const optional = Object.keys(lock.packages["node_modules/node-llama-cpp"].optionalDependencies ?? {});
    expect(optional.length).toBeGreaterThan(0);
    const missing = optional.filter((name) => !lock.packages[`node_modules/${name}`]);
    expect(missing, "re-add these platform-only entries (see .ci/run)").toEqual([]);
  });
});
