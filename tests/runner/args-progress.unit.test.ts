// The runner's flags and its progress display (a fake clock; nothing here measures speed).
import { describe, expect, it } from "vitest";
import { defaultErrorFile, parseRunnerArgs, USAGE } from "../../runner/args.js";
import { commandLine, portableOptions, resumeCommand } from "../../runner/cli.js";
import { createProgressReporter, formatDuration } from "../../runner/progress.js";
import { USAGE_EXIT } from "../../runner/run-offline.js";

const usage = { promptTokens: 0, completionTokens: 0, cachedTokens: 0 };

describe("runner flags", () => {
  it("takes a model to download as --model, kept as written, and refuses one it cannot download", () => {
    const parsed = parseRunnerArgs(["-i", "in.jsonl", "-o", "out.jsonl", "--model", "hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q8_0"], "/w");
    expect(parsed).toMatchObject({ kind: "run", args: { model: "hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q8_0" } });
    expect(parseRunnerArgs(["-i", "in.jsonl", "-o", "out.jsonl", "--model", "https://h.example/m.gguf"], "/w")).toMatchObject({
      args: { model: "https://h.example/m.gguf" },
    });
    expect(parseRunnerArgs(["-i", "in.jsonl", "-o", "out.jsonl", "--model", "hf:Qwen"], "/w")).toEqual({
      kind: "usage",
      message: expect.stringMatching(/^--model hf:Qwen: not a Hugging Face reference/),
    });
  });

  it("takes vLLM-style short and long flags", () => {
    expect(
      parseRunnerArgs(["-i", "in.jsonl", "-o", "out.jsonl", "--concurrency", "4", "--threads", "2", "--model", "m.gguf"], "/w"),
    ).toEqual({
      kind: "run",
      args: { input: "/w/in.jsonl", output: "/w/out.jsonl", errors: "/w/out.errors.jsonl", concurrency: 4, threads: 2, model: "/w/m.gguf" },
    });
    expect(
      parseRunnerArgs(["--input-file", "/a", "--output-file", "/b", "--error-file", "/c", "--sequences", "8", "--contexts", "2"]),
    ).toMatchObject({
      args: { input: "/a", output: "/b", errors: "/c", sequences: 8, contexts: 2 },
    });
    expect(parseRunnerArgs(["-h"])).toEqual({ kind: "help" });
  });

  it("takes a dataset job's --keep as names separated by commas or as a JSON array, as the job file holds it", () => {
    const keepOf = (value: string) => {
      const parsed = parseRunnerArgs(["-i", "a.csv", "-o", "b.csv", "--prompt", "{{text}}", "--keep", value], "/w");
      return parsed.kind === "dataset" ? parsed.args.flags.keep : parsed;
    };
    expect(keepOf("id, text")).toEqual(["id", "text"]);
    expect(keepOf('["id","text"]')).toEqual(["id", "text"]);
    expect(keepOf("[draft]")).toEqual(["[draft]"]);
  });

  it("derives the error file from the output, keeping a URL's query", () => {
    expect(defaultErrorFile("results/out.jsonl")).toBe("results/out.errors.jsonl");
    expect(defaultErrorFile("out")).toBe("out.errors.jsonl");
    expect(defaultErrorFile("https://b.example/r/out.jsonl?sig=1")).toBe("https://b.example/r/out.errors.jsonl?sig=1");
  });

  it("resolves local paths against where the user ran npm, leaving URLs alone", () => {
    const argv = ["-i", "in.jsonl", "-o", "https://b.example/out.jsonl?sig=1", "--error-file", "/abs/err.jsonl", "--model", "../m.gguf"];
    expect(parseRunnerArgs(argv, "/home/me/data")).toEqual({
      kind: "run",
      args: {
        input: "/home/me/data/in.jsonl",
        output: "https://b.example/out.jsonl?sig=1",
        errors: "/abs/err.jsonl",
        model: "/home/me/m.gguf",
      },
    });
  });

  it("refuses missing, unknown and bad flags with a message", () => {
    expect(parseRunnerArgs(["-o", "x"])).toEqual({ kind: "usage", message: "missing -i/--input-file" });
    expect(parseRunnerArgs(["-i", "x"])).toEqual({ kind: "usage", message: "missing -o/--output-file" });
    expect(parseRunnerArgs(["-i", "a", "-o", "b", "--bogus"])).toMatchObject({ kind: "usage", message: expect.stringMatching(/bogus/) });
    expect(parseRunnerArgs(["-i", "a", "-o", "b", "--concurrency", "0"])).toMatchObject({
      message: expect.stringMatching(/--concurrency must be an integer >= 1/),
    });
    expect(parseRunnerArgs(["-i", "a", "-o", "a"])).toMatchObject({ kind: "usage", message: expect.stringMatching(/three different/) });
    expect(parseRunnerArgs(["-i", "a.jsonl", "-o", "./a.jsonl"])).toMatchObject({
      kind: "usage",
      message: expect.stringMatching(/three different/),
    });
  });
});

function recorder(isTTY: boolean) {
  const out: string[] = [];
  return { stream: { isTTY, write: (t: string) => out.push(t) }, out };
}

describe("runner --help", () => {
  /** Each status the help's "Exit status:" paragraph states, with what it says leads to it. */
  const statuses = () => {
    const paragraph = USAGE.slice(USAGE.indexOf("Exit status:")).replace(/\s+/g, " ");
    return Object.fromEntries([...paragraph.matchAll(/(\d+) (?:for|when) ([^;]*)/g)].map((m) => [Number(m[1]), m[2]]));
  };

  it("states the exit statuses the runner returns: an invalid file, a missing one, bad flags or settings exit 2", () => {
    const s = statuses();
    expect(
      Object.keys(s)
        .map(Number)
        .sort((a, b) => a - b),
    ).toEqual([0, 1, USAGE_EXIT, 130]);
    for (const input of ["bad flags or settings", "missing or invalid input file", "a model the models file does not serve"])
      expect(s[USAGE_EXIT], input).toContain(input);
    expect(s[1]).not.toMatch(/invalid|flag/);
    expect(s[1]).toMatch(/I\/O failure/);
    expect(s[0]).toMatch(/every line ran/);
    expect(s[130]).toMatch(/interrupted/);
    expect(USAGE.replace(/\s+/g, " ")).toContain(`an invalid file runs nothing and exits ${USAGE_EXIT} with the line numbers`);
  });
});

describe("runner progress", () => {
  it("redraws one bar in place on a terminal, with rate and ETA", () => {
    let t = 0;
    const { stream, out } = recorder(true);
    const p = createProgressReporter({ total: 100, stream, now: () => t });
    t = 10_000;
    p.update({ completed: 25, failed: 0, usage: { ...usage, completionTokens: 500 } });
    p.update({ completed: 26, failed: 0, usage }); // within the redraw interval: not drawn
    t = 20_000;
    p.finish({ completed: 98, failed: 2, usage: { ...usage, completionTokens: 2000 } });
    expect(out).toHaveLength(2);
    expect(out[0]).toBe(`\r\x1b[K[########----------------------] 25/100 (25%) 2.5 req/s 50 tok/s ETA 30s`);
    expect(out[1]).toMatch(/^\r\x1b\[K\[#{30}\] 100\/100 \(100%\) 5\.0 req\/s 100 tok\/s done, 2 failed\n$/);
  });

  it("prints plain lines at an interval when not a terminal", () => {
    let t = 0;
    const { stream, out } = recorder(false);
    const p = createProgressReporter({ total: 10, stream, now: () => t, intervalMs: 5_000 });
    for (let i = 1; i <= 10; i++) {
      t = i * 1_000;
      p.update({ completed: i, failed: 0, usage });
    }
    p.finish({ completed: 10, failed: 0, usage });
    expect(out).toEqual(["progress: 5/10 (50%) 1.0 req/s 0 tok/s ETA 5.0s\n", "progress: 10/10 (100%) 1.0 req/s 0 tok/s done\n"]);
  });

  it("counts a resumed run's earlier results as done, but not in its rates or ETA; finish returns what it drew", () => {
    let t = 0;
    const { stream, out } = recorder(false);
    const p = createProgressReporter({ total: 2000, stream, now: () => t, intervalMs: 1_000, base: { done: 600, completionTokens: 6000 } });
    t = 1_000;
    p.update({ completed: 601, failed: 0, usage: { ...usage, completionTokens: 6010 } });
    expect(out[0]).toBe("progress: 601/2000 (30%) 1.0 req/s 10 tok/s ETA 23m19s\n");
    t = 100_000;
    const rates = p.finish({ completed: 2000, failed: 0, usage: { ...usage, completionTokens: 20_000 } });
    expect(out[1]).toBe("progress: 2000/2000 (100%) 14.0 req/s 140 tok/s done\n");
    expect(rates).toEqual({ seconds: 100, requestsPerSecond: 14, tokensPerSecond: 140 });
  });

  it("counts the prompt tokens' rate where the requests generate none (embeddings, rerank, score)", () => {
    let t = 0;
    const { stream, out } = recorder(false);
    const p = createProgressReporter({
      total: 100,
      stream,
      now: () => t,
      intervalMs: 1_000,
      tokens: "prompt",
      base: { done: 20, completionTokens: 0, promptTokens: 1_000 },
    });
    t = 2_000;
    p.update({ completed: 40, failed: 0, usage: { ...usage, promptTokens: 2_000 } });
    expect(out[0]).toBe("progress: 40/100 (40%) 10.0 req/s 500 prompt tok/s ETA 6.0s\n");
    const rates = p.finish({ completed: 100, failed: 0, usage: { ...usage, promptTokens: 5_000 } });
    expect(rates.tokensPerSecond).toBe(2_000);
  });

  it("resumes a batch file without --overwrite, which would start it afresh; a dataset job keeps it", () => {
    expect(resumeCommand("run", ["-i", "a.jsonl", "--overwrite", "-o", "b.jsonl"])).toMatch(/ -i a\.jsonl -o b\.jsonl$/);
    expect(resumeCommand("dataset", ["-i", "a.csv", "--overwrite"])).toMatch(/ -i a\.csv --overwrite$/);
    // Stopped before its requests began: the earlier run's files are still there for --overwrite to replace.
    expect(resumeCommand("run", ["-i", "a.jsonl", "--overwrite"], false)).toMatch(/ -i a\.jsonl --overwrite$/);
  });

  it("prints the command that resumes, as the user typed it", () => {
    expect(commandLine(["-i", "in.jsonl", "-o", "out put.jsonl"], { npm_lifecycle_event: "batch" })).toBe(
      "npm run batch -- -i in.jsonl -o 'out put.jsonl'",
    );
    expect(commandLine(["-i", "it's.jsonl"], {}, "dist/runner/main.js", [])).toBe("node dist/runner/main.js -i 'it'\\''s.jsonl'");
    // Node's options come along: the TypeScript source runs only under --import tsx.
    const tsx = import.meta.resolve("tsx");
    expect(commandLine(["-i", "in.jsonl"], {}, "/repo/runner/main.ts", ["--expose-gc", "--import", "tsx"])).toBe(
      `node --expose-gc --import ${tsx} /repo/runner/main.ts -i in.jsonl`,
    );
    // A module given by package name is given as its file, so the command runs from any folder.
    expect(portableOptions(["--import=tsx", "--require", "./local.cjs", "--import", "file:///x.mjs"])).toEqual([
      `--import=${tsx}`,
      "--require",
      "./local.cjs",
      "--import",
      "file:///x.mjs",
    ]);
  });

  it("formats durations for people", () => {
    expect(formatDuration(0.42)).toBe("0.4s");
    expect(formatDuration(42)).toBe("42s");
    expect(formatDuration(125)).toBe("2m05s");
    expect(formatDuration(3 * 3600 + 7 * 60)).toBe("3h07m");
  });
});

describe("withArgs", () => {
  it("puts the engine flags over the configuration, --contexts included", async () => {
    const { loadConfig } = await import("../../config/config.js");
    const { withArgs } = await import("../../runner/run-offline.js");
    const config = withArgs(loadConfig({}), { threads: 1, sequences: 8, contexts: 2 });
    expect(config.engine).toMatchObject({ threads: 1, sequences: 8, contexts: 2 });
    expect(withArgs(loadConfig({ CONTEXTS: "3" }), {}).engine.contexts).toBe(3);
  });
});
