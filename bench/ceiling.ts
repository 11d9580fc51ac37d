// The kernels' ceiling for a workload of prompt families: llama.cpp's llama-batched-bench, built from the source
// node-llama-cpp ships (scripts/build-llama-server.sh --batched-bench), runs one family as a single shared prompt
// (-pps) and all its lines' answers in lockstep, on every core, in one KV cache. The workload at that speed is its
// families times one family, plus the lines' own prompt tails at the tool's prompt speed. No scheduler can do less:
// each preamble is evaluated once, no line waits for a sequence, every step holds a whole family.
import { spawnSync } from "node:child_process";
import os from "node:os";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";
import { llamaCppTool } from "../testkit/llama-server.js";
import type { Workload } from "./peer.js";

/** A family workload's shape in the model's own tokens. */
export interface FamilyShape {
  families: number;
  /** Lines per family (the tool's -npl). */
  lines: number;
  /** The tokens a family's lines share (-npp), averaged over the families. */
  shared: number;
  /** Prompt tokens past each line's shared opening, summed over all lines. */
  tails: number;
  /** Answer tokens per line (-ntg). */
  maxTokens: number;
}

export interface Ceiling extends FamilyShape {
  /** One family: its shared prompt and its lines' answers, the fastest of the tool's runs. */
  familySeconds: number;
  /** The tool's prompt speed on that shared prompt, tokens a second. */
  promptPerSecond: number;
  threads: number;
  seconds: number;
}

/** The cached llama-batched-bench, built on first use (`cachedOnly`: never built); null when there is none. */
export function batchedBenchBinary(log: (line: string) => void, cachedOnly = false): string | null {
  try {
    return llamaCppTool(["--batched-bench", ...(cachedOnly ? ["--cached"] : [])]);
  } catch (err) {
    log(`  llama-batched-bench: cannot be built here (${(err as Error).message.split("\n")[0]})`);
    return null;
  }
}

/** Counts the workload's families (by the text before "\nItem ") and their shared tokens with the model's tokenizer. */
export async function familyShape(modelPath: string, w: Workload): Promise<FamilyShape> {
  const llama = await getLlama({ build: "never", skipDownload: true, progressLogs: false, logLevel: LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath, vocabOnly: true });
  try {
    const byFamily = new Map<string, number[][]>();
    let maxTokens = 0;
    for (const r of w.requests) {
      const prompt = String(r.body.prompt);
      const key = prompt.slice(0, prompt.indexOf("\nItem "));
      byFamily.set(key, [...(byFamily.get(key) ?? []), Array.from(model.tokenize(prompt, false))]);
      maxTokens = Math.max(maxTokens, Number(r.body.max_tokens));
    }
    let shared = 0;
    let tails = 0;
    for (const prompts of byFamily.values()) {
      const common = commonPrefix(prompts);
      shared += common;
      for (const p of prompts) tails += p.length - common;
    }
    const families = byFamily.size;
    return { families, lines: Math.round(w.requests.length / families), shared: Math.round(shared / families), tails, maxTokens };
  } finally {
    await model.dispose();
    await llama.dispose();
  }
}

function commonPrefix(prompts: readonly number[][]): number {
  let n = 0;
  while (prompts.every((p) => n < p.length && p[n] === prompts[0][n])) n++;
  return n;
}

/**
 * The ceiling of `shape` on this machine: the tool run `runs` times on one family with flash attention on and as many
 * off (which is faster depends on the model's heads), its fastest run kept.
 */
export function kernelCeiling(binary: string, modelPath: string, shape: FamilyShape, runs = 3): Ceiling {
  const threads = os.availableParallelism();
  const cells = Math.max(40_000, shape.shared + shape.lines * shape.maxTokens + 256);
  let best: { seconds: number; promptPerSecond: number } | undefined;
  for (let k = 0; k < 2 * runs; k++) {
    const args = ["-m", modelPath, "-c", String(cells), "-b", "2048", "-ub", "512", "-npp", String(shape.shared)];
    args.push("-ntg", String(shape.maxTokens), "-npl", String(shape.lines), "-pps", "-kvu", "-t", String(threads));
    args.push("-fa", k % 2 === 0 ? "on" : "off");
    const run = batchedBenchRun(binary, args);
    if (!best || run.seconds < best.seconds) best = run;
  }
  const familySeconds = best!.seconds;
  const seconds = shape.families * familySeconds + shape.tails / best!.promptPerSecond;
  return { ...shape, familySeconds, promptPerSecond: best!.promptPerSecond, threads, seconds };
}

/**
 * One run of the tool, tried twice: on a loaded machine it once ended with its table's header and no row. A run
 * with no row after both tries fails with what the tool said on stderr.
 */
function batchedBenchRun(binary: string, args: string[]): { seconds: number; promptPerSecond: number } {
  for (let tries = 1; ; tries++) {
    const r = spawnSync(binary, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], maxBuffer: 16 << 20 });
    try {
      if (r.error) throw r.error;
      return parseBatchedBench(r.stdout);
    } catch (err) {
      if (tries < 2) continue;
      const said = (r.stderr ?? "").trim().split("\n").slice(-5).join("\n");
      throw new Error(`${(err as Error).message}\n(exit ${r.status ?? r.signal}; its stderr ended with:\n${said})`);
    }
  }
}

/** The tool's result row: `| PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |`. */
export function parseBatchedBench(out: string): { seconds: number; promptPerSecond: number } {
  const rows = out
    .split("\n")
    .map((line) => line.split("|").map((c) => c.trim()))
    .filter((cells) => cells.length >= 12 && /^\d+$/.test(cells[1]));
  const last = rows.at(-1);
  if (!last) throw new Error(`llama-batched-bench printed no result row:\n${out.slice(-500)}`);
  return { promptPerSecond: Number(last[6]), seconds: Number(last[9]) };
}
