// LoRA adapters in one batch against one batch per adapter: the same lines over 4 random adapters of the generated
// model, interleaved in one batch (grouped by adapter at admission, each adapter's lines on its own contexts), then
// as 4 batches of one adapter each submitted together; the best of two runs each on one server.
import { mkdtemp, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { writeGeneratedLora } from "../engine/load/generated-lora.js";
import { completionLines } from "../testkit/workload.js";
import { startServer } from "./server.js";
import { runServiceBatch } from "./service-batch.js";

export interface AdaptersResult {
  model: string;
  lines: number;
  adapters: number;
  /** Seconds of the interleaved batch, and of the 4 batches together (upload to the last one completed). */
  mixedSeconds: number;
  separateSeconds: number;
  /** separate ÷ mixed: 1 = as fast, above 1 = the mixed batch faster. */
  ratio: number;
}

const ADAPTERS = ["adapter-a", "adapter-b", "adapter-c", "adapter-d"];

export async function compareAdapters(
  m: { name: string; path: string },
  plan: { lines: number; maxTokens: number; runs: number },
  log: (msg: string) => void,
): Promise<AdaptersResult> {
  log(`\nadapters: ${plan.lines} lines over ${ADAPTERS.length} LoRA adapters of ${m.name}, one batch against one per adapter`);
  const server = await startServer("", { MODELS_FILE: await modelsFile(m.path) });
  try {
    const lineOf = (i: number) => ({
      ...completionLines(1, { prefix: `line-${i}`, maxTokens: plan.maxTokens, prompt: () => `Once upon a time, story ${i}:` })[0]!,
      custom_id: `line-${i}`,
    });
    const lines = Array.from({ length: plan.lines }, (_, i) => {
      const line = lineOf(i);
      return { ...line, body: { ...line.body, model: ADAPTERS[i % ADAPTERS.length] } };
    });
    const perAdapter = ADAPTERS.map((a) => lines.filter((l) => l.body.model === a));
    // Every adapter's contexts made before anything is timed.
    await runServiceBatch(
      server,
      ADAPTERS.map((a, i) => ({ ...lines[i]!, body: { ...lines[i]!.body, model: a } })),
      { name: "warm-up" },
    );
    let mixed = Number.POSITIVE_INFINITY;
    let separate = Number.POSITIVE_INFINITY;
    for (let run = 0; run < plan.runs; run++) {
      mixed = Math.min(mixed, (await runServiceBatch(server, lines, { name: `mixed-${run}` })).seconds);
      const started = performance.now();
      await Promise.all(perAdapter.map((l, i) => runServiceBatch(server, l, { name: `separate-${run}-${i}` })));
      separate = Math.min(separate, (performance.now() - started) / 1000);
      log(`  run ${run + 1}: one batch ${mixed.toFixed(2)} s, ${ADAPTERS.length} batches ${separate.toFixed(2)} s (best so far)`);
    }
    return {
      model: m.name,
      lines: plan.lines,
      adapters: ADAPTERS.length,
      mixedSeconds: mixed,
      separateSeconds: separate,
      ratio: separate / mixed,
    };
  } finally {
    await server.stop();
  }
}

/** A models file in a folder of its own: the base and its 4 adapters, written beside it. */
async function modelsFile(base: string): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "obi-bench-adapters-"));
  for (const [i, a] of ADAPTERS.entries()) await writeGeneratedLora(base, path.join(dir, `${a}.gguf`), i + 2);
  const file = path.join(dir, "models.yaml");
  const adapters = ADAPTERS.map((a) => `        - { name: ${a}, path: ./${a}.gguf }`);
  await writeFile(file, ["models:", "  - name: base", "    local:", `      path: ${base}`, "      adapters:", ...adapters, ""].join("\n"));
  return file;
}
