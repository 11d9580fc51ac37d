// A test file's tier is in its name (`<name>.unit|int|sys.test.ts`, vitest.config.ts); this checks the name against
// what the file imports, so a file that starts a process or loads a model cannot be named into a faster tier.
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { repoFiles, repoRoot } from "../testkit/repo-root.js";

/** What only the system tier may import: child processes, PostgreSQL, S3, Chromium, llama-server, loop disks. */
const PROCESSES =
  /from "(node:child_process|s3rver|playwright-core|[./]+\/(helpers\/(process|cluster|browser|loop-disk|server-testbed)|testkit\/(postgres|shared-state|llama-server)|chaos\/(distributed|one-machine|process|tcp-proxy))\.js)"/;
/** What loads a model, which the unit tier may not (node-llama-cpp's types and GGUF reader load none). */
const MODEL =
  /from "[./]+\/(helpers\/(service|test-engine|embedded-plane)|testkit\/model|engine\/index|app\/service)\.js"|\b(getLlama|loadModel)\(/;

// This file names the imports it looks for, so it is left out of what it checks.
const files = repoFiles("tests", (name) => name.endsWith(".test.ts")).filter((f) => f !== "tests/tiers.unit.test.ts");
const tierOf = (file: string) => /\.(unit|int|sys)\.test\.ts$/.exec(file)?.[1];
const text = (file: string) => readFileSync(path.join(repoRoot, file), "utf8");

describe("test tiers", () => {
  it("names every test file's tier, so every file runs in one project", () => {
    expect(files.length).toBeGreaterThan(100);
    expect(files.filter((f) => !tierOf(f))).toEqual([]);
  });

  it("starts no process outside the system tier", () => {
    expect(files.filter((f) => tierOf(f) !== "sys" && PROCESSES.test(text(f)))).toEqual([]);
  });

  it("loads no model in the unit tier", () => {
    expect(files.filter((f) => tierOf(f) === "unit" && MODEL.test(text(f)))).toEqual([]);
  });

  it("tells the imports apart", () => {
    // Built, so that the floors check does not read these examples as this file's imports.
    const importOf = (spec: string) => `import { x } from "${spec}";`;
    expect(PROCESSES.test(importOf("node:child_process"))).toBe(true);
    expect(PROCESSES.test(importOf("../../testkit/postgres.js"))).toBe(true);
    expect(PROCESSES.test(importOf("../../chaos/checker.js"))).toBe(false);
    expect(MODEL.test(importOf("../helpers/service.js"))).toBe(true);
    expect(MODEL.test(importOf("../../testkit/repo-root.js"))).toBe(false);
    expect(MODEL.test(importOf("node-llama-cpp"))).toBe(false);
  });
});
