// CI's later passes are chosen by a rule (testkit/test-passes.ts), not a list: this keeps the rule honest, so a
// file whose model is what it tests runs again without ../shared, and an engine test on the default build runs
// again on the prebuilt one.
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../../testkit/repo-root.js";
import {
  defaultBuildFiles,
  NAMES_ITS_BUILDS,
  noSharedFiles,
  readsSharedItself,
  SHARED_PICKS,
  sharedModelFiles,
  testFiles,
} from "../../testkit/test-passes.js";

const text = (file: string) => readFileSync(path.join(repoRoot, file), "utf8");
const reaching = new Set(sharedModelFiles());
const noShared = new Set(noSharedFiles());

/** testkit/model.ts's exported functions, each with its body (up to the next export or doc comment). */
function modelExports(): Map<string, string> {
  const source = text("testkit/model.ts");
  const found = [...source.matchAll(/export (?:async )?function (\w+)/g)];
  return new Map(found.map((m, i) => [m[1], source.slice(m.index, found[i + 1]?.index ?? source.length)]));
}

describe("the pass without ../shared", () => {
  it("runs every test file that reads ../shared itself", () => {
    const direct = testFiles().filter((f) => readsSharedItself(f));
    expect(direct.length).toBeGreaterThan(10);
    expect(direct.filter((f) => !noShared.has(f))).toEqual([]);
  });

  it("finds the files that reach it through a helper, and runs those of the integration tier", () => {
    const helpers = ["tests/helpers/service.ts", "tests/helpers/cluster.ts", "tests/helpers/embedded-plane.ts"];
    for (const helper of helpers) expect(readsSharedItself(helper), helper).toBe(true);
    const importers = testFiles().filter((f) =>
      helpers.some((h) => new RegExp(`from "[./]+/helpers/${path.basename(h, ".ts")}\\.js"`).test(text(f))),
    );
    expect(importers.length).toBeGreaterThan(20);
    expect(importers.filter((f) => !reaching.has(f))).toEqual([]);
    const integration = [...reaching].filter((f) => f.endsWith(".int.test.ts"));
    expect(integration.length).toBeGreaterThan(20);
    expect(integration.filter((f) => !noShared.has(f))).toEqual([]);
  });

  it("leaves out only system files that meet ../shared through a helper, not by a read of their own", () => {
    const left = [...reaching].filter((f) => !noShared.has(f));
    expect(left.length).toBeGreaterThan(0);
    for (const f of left) {
      expect(f, "a system file").toMatch(/\.sys\.test\.ts$/);
      expect(readsSharedItself(f), f).toBe(false);
    }
  });

  it("knows every function of testkit/model.ts that picks ../shared's model, and only those", () => {
    const bodies = modelExports();
    const picks = new Set(["sharedModel"]);
    // Whatever calls a picker picks too, until nothing changes.
    for (let grown = true; grown; ) {
      grown = false;
      for (const [name, body] of bodies)
        if (!picks.has(name) && [...picks].some((p) => body.includes(`${p}(`))) grown = picks.add(name).size > 0;
    }
    for (const name of bodies.keys()) expect(SHARED_PICKS.test(name), name).toBe(picks.has(name));
  });

  it("tells a read of ../shared from a mention of it", () => {
    // Built, so that this file does not read as one that reads ../shared.
    const model = `"${["..", "..", "testkit", "model.js"].join("/")}"`;
    const shared = ["..", "shared", "models", "x.gguf"].join("/");
    expect(readsSharedItself("x.ts", `import { testModelPath } from ${model};`)).toBe(true);
    expect(readsSharedItself("x.ts", `import { openGeneratedEngine, engineBuilds } from ${model};`)).toBe(false);
    expect(readsSharedItself("x.ts", `const f = path.resolve(root, "${shared}");`)).toBe(true);
    expect(readsSharedItself("x.ts", `// runs on stories260K from ${shared} where it is`)).toBe(false);
  });

  it("leaves out what runs the same either way: the unit tier and files on the generated model", () => {
    expect([...noShared].filter((f) => f.endsWith(".unit.test.ts"))).toEqual([]);
    expect(noShared.size).toBeLessThan(testFiles().length);
  });
});

describe("the pass on the prebuilt build", () => {
  const engineTests = testFiles().filter((f) => f.startsWith("tests/engine/") && !f.endsWith(".unit.test.ts"));
  const again = new Set(defaultBuildFiles());

  it("runs every engine test that opens an engine without naming its build", () => {
    for (const file of engineTests.filter((f) => !again.has(f))) {
      const source = text(file);
      expect(NAMES_ITS_BUILDS.test(source), file).toBe(true);
      expect(source, `${file} opens the default build`).not.toMatch(/openTestEngine\(|startTestService\(/);
      // Every engine it opens names its build.
      const opened = source.split("createEngine({").slice(1);
      for (const options of opened) expect(options.slice(0, options.indexOf("})")), file).toMatch(/\bbuild\b/);
    }
  });

  it("tells a file that runs each build from one on the default", () => {
    expect(NAMES_ITS_BUILDS.test("describe.each(await engineBuilds())(")).toBe(true);
    expect(NAMES_ITS_BUILDS.test('describe.each(["prebuilt", "patched"] as const)(')).toBe(true);
    expect(NAMES_ITS_BUILDS.test("const engine = await openTestEngine();")).toBe(false);
    expect(again.size).toBeGreaterThan(10);
  });
});
