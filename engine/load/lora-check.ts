// Whether a LoRA adapter fits its base model, from both GGUF headers alone: a LoRA adapter (general.type adapter,
// adapter.type lora) of the base's architecture, whose every `<name>.lora_a` / `.lora_b` pair adapts a matrix the base
// has, of its inputs and outputs (llama.cpp's adapter loader checks the same, deep in a load, with a log line only).
import type { GgufFileInfo } from "node-llama-cpp";
import { readGgufHeader } from "./gguf-header.js";

interface Header {
  arch: string;
  width: number;
  tensors: Map<string, number[]>;
  meta: Record<string, unknown>;
}

async function header(file: string): Promise<Header> {
  let info: GgufFileInfo;
  try {
    info = await readGgufHeader(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new Error(code ? `cannot be read (${code})` : `is not a GGUF file (${(err as Error).message})`);
  }
  const meta = info.metadata as Record<string, unknown> & { general?: { architecture?: string } };
  const arch = String(meta.general?.architecture ?? "");
  const width = Number((meta[arch] as { embedding_length?: number } | undefined)?.embedding_length ?? 0);
  const tensors = new Map((info.fullTensorInfo ?? []).map((t) => [t.name, t.dimensions.map(Number)]));
  return { arch, width, tensors, meta };
}

const shape = (h: Header) => `${h.arch || "no architecture"}${h.width ? `, ${h.width} wide` : ""}`;

/** The adapter's own file is missing or not GGUF: a wrong path, not an adapter that misfits its base. */
export class AdapterFileError extends Error {}

/** Why the adapter at `adapterPath` cannot apply to the model at `basePath`; undefined when it fits. Throws AdapterFileError. */
export async function loraMismatch(basePath: string, adapterPath: string): Promise<string | undefined> {
  let adapter: Header;
  try {
    adapter = await header(adapterPath);
  } catch (err) {
    throw new AdapterFileError(`${adapterPath} ${(err as Error).message}`);
  }
  const base = await header(basePath);
  const general = adapter.meta.general as { type?: string } | undefined;
  const kind = (adapter.meta.adapter as { type?: string } | undefined)?.type;
  if (general?.type !== "adapter" || kind !== "lora") {
    return `it is not a LoRA adapter (general.type ${general?.type ?? "absent"}, adapter.type ${kind ?? "absent"})`;
  }
  if (adapter.arch !== base.arch) return `it is for ${adapter.arch || "no architecture"}, the base is ${shape(base)}`;
  let pairs = 0;
  for (const [name, a] of adapter.tensors) {
    if (!name.endsWith(".lora_a")) continue;
    const target = name.slice(0, -".lora_a".length);
    const b = adapter.tensors.get(`${target}.lora_b`);
    const weights = base.tensors.get(target);
    if (!b) return `it has ${name} without ${target}.lora_b`;
    if (!weights) return `it adapts ${target}, which the base (${shape(base)}) does not have`;
    if (a[0] !== weights[0] || b[1] !== weights[1]) {
      return `it adapts ${target} as ${a[0]} inputs by ${b[1]} outputs, the base's is ${weights[0]} by ${weights[1]} (${shape(base)})`;
    }
    pairs++;
  }
  return pairs === 0 ? "it adapts no tensor (no .lora_a / .lora_b pairs)" : undefined;
}
