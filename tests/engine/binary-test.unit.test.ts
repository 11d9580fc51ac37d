import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { BINARY_TEST_FILE, detachBinaryTests } from "../../engine/load/binary-test.js";

const require = createRequire(import.meta.url);

describe("node-llama-cpp's binary test, out of the terminal's process group", () => {
  it("is the file node-llama-cpp forks, importing fork by name (a new version that changes this fails here)", () => {
    const dist = path.dirname(require.resolve("node-llama-cpp"));
    const file = path.join(dist, "bindings/utils/testBindingBinary.js");
    expect(file).toMatch(BINARY_TEST_FILE);
    const source = readFileSync(file, "utf8");
    expect(source).toMatch(/^import \{ fork \} from ["']node:child_process["'];$/m);
    expect(source).toMatch(/forkFunction\.fork\(__filename, \[\], \{\s*detached: false,/);
  });

  it("forks that file detached, and leaves every other fork as it was", () => {
    const calls: unknown[][] = [];
    // Node's module, as node-llama-cpp imports it, stood in for: the wrapper replaces its fork.
    const childProcess = {
      fork: (...args: unknown[]) => {
        calls.push(args);
        return {};
      },
    };
    detachBinaryTests(childProcess as never);
    const test = "/x/node_modules/node-llama-cpp/dist/bindings/utils/testBindingBinary.js";
    childProcess.fork(test, [], { detached: false, env: { A: "1" } });
    childProcess.fork("/x/other.js", [], { detached: false });
    expect(calls).toEqual([
      [test, [], { detached: true, env: { A: "1" } }],
      ["/x/other.js", [], { detached: false }],
    ]);
  });
});
