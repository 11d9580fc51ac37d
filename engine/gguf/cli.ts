// Writes a generated model: npm run gen-model -- --preset qwen2.5-0.5b --out /tmp/x.gguf [--seed 1], or a random
// LoRA adapter for one: --lora-for base.gguf --out adapter.gguf [--seed 2].
// Without --out the model goes to the shared cache (as the service would generate it).
import { statSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { writeGeneratedLora } from "../load/generated-lora.js";
import { DEFAULT_SEED, ensureGeneratedModel, writeGeneratedModel } from "../load/generated-model.js";
import { DEFAULT_PRESET, MODEL_PRESETS, PRESET_NAMES } from "./presets.js";

const usage = `usage: gen-model [--preset ${PRESET_NAMES.join("|")}] [--seed N] [--out FILE | --dir DIR]
       gen-model --lora-for BASE.gguf --out ADAPTER.gguf [--seed N]

presets:
${PRESET_NAMES.map((n) => `  ${n.padEnd(14)} ${MODEL_PRESETS[n].description}`).join("\n")}`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      preset: { type: "string", default: DEFAULT_PRESET },
      seed: { type: "string", default: String(DEFAULT_SEED) },
      out: { type: "string" },
      dir: { type: "string" },
      "lora-for": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) return void console.log(usage);
  const seed = Number(values.seed);
  const started = performance.now();
  let file: string;
  const loraFor = values["lora-for"];
  if (loraFor !== undefined) {
    if (values.out === undefined) throw new Error("--lora-for needs --out: where the adapter is written");
    file = path.resolve(values.out);
    await writeGeneratedLora(path.resolve(loraFor), file, seed);
  } else if (values.out !== undefined) {
    file = path.resolve(values.out);
    await writeGeneratedModel(file, { preset: values.preset, seed });
  } else {
    file = await ensureGeneratedModel({ preset: values.preset, seed, dir: values.dir });
  }
  const ms = performance.now() - started;
  const bytes = statSync(file).size;
  console.log(`${file}\n${(bytes / 2 ** 20).toFixed(1)} MiB (${bytes} bytes) in ${ms.toFixed(0)} ms`);
}

main().catch((err: unknown) => {
  console.error(`gen-model: ${err instanceof Error ? err.message : String(err)}\n\n${usage}`);
  process.exitCode = 1;
});
