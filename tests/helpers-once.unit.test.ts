// The shared helpers have one definition each (at a module's top level), so a name means one thing wherever a
// test, a bench or chaos uses it.
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { repoFiles, repoRoot } from "../testkit/repo-root.js";

const SHARED = ["repoRoot", "completionLines", "completionJsonl", "customIds", "until", "hexId", "waitForBatch"];
describe("shared helpers", () => {
  it("are each defined once in the repository", () => {
    const files = repoFiles("", (name) => /\.(ts|mts)$/.test(name) && !name.endsWith(".d.ts"));
    const definitions = (name: string) =>
      files.filter((f) =>
        new RegExp(`^(export\\s+)?(async\\s+)?(function\\s*\\*?\\s*${name}\\b|(const|let)\\s+${name}\\s*[=:])`, "m").test(
          readFileSync(path.join(repoRoot, f), "utf8"),
        ),
      );
    const counts = Object.fromEntries(SHARED.map((name) => [name, definitions(name)]));
    for (const name of SHARED) expect(counts[name], name).toHaveLength(1);
  });
});
