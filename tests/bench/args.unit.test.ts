// The bench's command line: --help prints the options instead of a stack trace, and a mistake (an unknown option, a
// part that does not exist, a count that is not a number) is one clear line before anything runs.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { BenchUsageError, benchArgs, DURATION, PARTS, USAGE } from "../../bench/args.js";
import { makePlan, narrowPlan } from "../../bench/plan.js";
import { repoRoot } from "../../testkit/repo-root.js";

const refused = (argv: string[]) => {
  try {
    benchArgs(argv);
  } catch (err) {
    expect(err).toBeInstanceOf(BenchUsageError);
    return (err as Error).message;
  }
  throw new Error(`${argv.join(" ")} was accepted`);
};

describe("npm run bench's options", () => {
  it("answers --help and -h with the options, each part named, and how long a run takes", () => {
    expect(benchArgs(["--help"])).toBe("help");
    expect(benchArgs(["-h", "--only", "nothing"])).toBe("help");
    for (const option of ["--quick", "--only", "--model", "--workloads", "--slots", "--ablations", "--front-pairs", "--lanes-rate"])
      expect(USAGE).toContain(option);
    for (const part of PARTS) expect(USAGE).toContain(part);
    expect(USAGE).toContain(DURATION.full);
    expect(USAGE).toContain(DURATION.quick);
    // --quick runs stories260K only where ../shared has it.
    expect(USAGE).toMatch(/stories260K where \.\.\/shared\/models has it, else the generated\s+'small' model/);
  });

  it("runs every part at its defaults, and the parts asked for", () => {
    const all = benchArgs([]);
    expect(all).not.toBe("help");
    if (all === "help") return;
    expect([...all.parts]).toEqual([...PARTS]);
    expect(all).toMatchObject({ quick: false, frontPairs: 1, lanesSlots: 16, lanesRate: 1, ablations: true, workloads: [] });
    const some = benchArgs(["--quick", "--only", "peer, lanes", "--slots", "8,16", "--ablations", "false", "--lanes-rate", "0.5"]);
    if (some === "help") throw new Error("help");
    expect([...some.parts]).toEqual(["peer", "lanes"]);
    expect(some).toMatchObject({ quick: true, slots: [8, 16], ablations: false, lanesRate: 0.5 });
  });

  it("refuses a mistake with one line naming it", () => {
    expect(refused(["--quik"])).toMatch(/^Unknown option '--quik'\. npm run bench -- --help lists the options\.$/);
    expect(refused(["extra"])).toMatch(/extra.*--help lists the options/);
    expect(refused(["--only", "peeer,scale"])).toBe(`--only takes parts among ${PARTS.join(", ")}; not "peeer"`);
    expect(refused(["--only", ""])).toMatch(/^--only takes parts among/);
    expect(refused(["--slots", "8,x"])).toBe('--slots takes a whole number of at least 1, not "x"');
    expect(refused(["--front-pairs", "0"])).toBe('--front-pairs takes a whole number of at least 1, not "0"');
    expect(refused(["--lines", "1e3x"])).toMatch(/^--lines takes a whole number/);
    expect(refused(["--ablations", "no"])).toBe('--ablations takes true or false, not "no"');
    expect(refused(["--lanes-rate=-1"])).toBe('--lanes-rate takes a number above 0, not "-1"');
  });
});

describe("how long the bench takes", () => {
  const read = (file: string) => readFileSync(path.join(repoRoot, file), "utf8");
  /** "~40 minutes", "about two hours", "a 2-minute plan": what a page says a run takes. */
  const DURATION_PHRASE = /(?:~|about )[\w.]+ (?:minutes?|hours?)|\b\d+-minute\b/g;

  it("is stated alike wherever it is stated: the bench's pages and code say --help's figures", () => {
    const files = [
      "bench/README.md",
      "docs/performance.md",
      ...readdirSync(path.join(repoRoot, "bench"))
        .filter((f) => f.endsWith(".ts"))
        .map((f) => `bench/${f}`),
    ];
    const stated = files.flatMap((f) => [...read(f).matchAll(DURATION_PHRASE)].map((m) => `${f}: ${m[0]}`));
    const allowed = new Set<string>([DURATION.full, DURATION.quick]);
    expect(stated.filter((s) => !allowed.has(s.slice(s.indexOf(": ") + 2)))).toEqual([]);
    for (const page of ["bench/README.md", "docs/performance.md"]) {
      expect(read(page), page).toContain(DURATION.full);
      expect(read(page), page).toContain(DURATION.quick);
    }
  });
});

describe("the plan narrowed by --model and --workloads", () => {
  const plan = () => makePlan(false, "/models/stories260K.gguf");
  const by = { model: "", workloads: [] as string[], ablations: true };

  it("keeps the models and workloads asked for", () => {
    const small = narrowPlan(plan(), { ...by, model: "small", workloads: ["families", "uniform"], slots: [8] });
    expect(small.models.map((m) => m.name)).toEqual(["small (generated, 8x512, Q8_0)"]);
    expect(small.peer.flatMap((p) => p.workloads.map((w) => w.name))).toEqual(["uniform"]);
    expect(small.scheduling.flatMap((s) => s.cases.map((c) => c.workload.name))).toEqual(["families-8", "families-64"]);
    expect(small.scheduling.every((s) => s.grid.parallel.join() === "8")).toBe(true);
  });

  it("refuses a filter that leaves nothing to run, naming what it could have matched", () => {
    expect(() => narrowPlan(plan(), { ...by, model: "qwne" })).toThrow(
      /^--model qwne names none of this plan's models: stories260K; small \(generated, 8x512, Q8_0\); qwen2\.5-0\.5b/,
    );
    expect(() => narrowPlan(plan(), { ...by, workloads: ["famlies", "uniform"] })).toThrow(
      /^--workloads famlies names none of this plan's workloads: uniform, mixed, .*families-8/,
    );
  });
});
