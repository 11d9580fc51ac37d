// The processes tests start run with the optimization budget of the run's workers (vitest.config.ts says why), and
// one started outside a test run (the bench's) with V8's defaults, as users run the product.
import { afterEach, describe, expect, it } from "vitest";
import { entryArgs } from "../testkit/entry.js";

const workerArgv = [...process.execArgv];
afterEach(() => {
  process.execArgv.splice(0, process.execArgv.length, ...workerArgv);
});

describe("entryArgs", () => {
  it("passes the workers' V8 budget on, before the caller's flags and the script", () => {
    const budget = workerArgv.find((a) => a.startsWith("--interrupt-budget="));
    expect(budget).toBe("--interrupt-budget=540672");
    const args = entryArgs("app/main.ts", ["--expose-gc"]);
    expect(args.slice(0, 2)).toEqual([budget, "--expose-gc"]);
    expect(args.at(-1)).toMatch(/app[\\/]main\.[jt]s$/);
  });

  it("adds nothing to a process whose own flags have no budget", () => {
    process.execArgv.splice(0, process.execArgv.length, ...workerArgv.filter((a) => !a.startsWith("--interrupt-budget=")));
    expect(entryArgs("app/main.ts", ["--expose-gc"])[0]).toBe("--expose-gc");
  });
});
