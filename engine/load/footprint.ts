// What a local model will take in memory before it is loaded, from the GGUF's header alone: its weights
// (the file's size) and the KV cache of its sequences (layers x KV heads x head width x K and V x 2 bytes per
// token), the latter capped as the engine caps automatically sized sequences (sequences.ts). Used to decide
// which local models fit at once; an estimate, so the budget it is held to should leave some room.
import { stat } from "node:fs/promises";
import { CONTEXT_MEMORY_SHARE, DEFAULT_SEQUENCES } from "../pool/sequences.js";
import { usableRam } from "./device-memory.js";
import { checkGgufFile } from "./gguf-check.js";
import { readGgufHeader } from "./gguf-header.js";

/** Compute buffers and the runtime beside the weights and the KV cache. */
const OVERHEAD_BYTES = 64 * 2 ** 20;

export interface FootprintInput {
  path: string;
  contextSize: number;
  /** 0: the engine chooses (CPU default, capped by memory). */
  sequences: number;
  /** Generation contexts on CPU when sequences are chosen. */
  contexts: number;
}

export async function estimateFootprint(input: FootprintInput): Promise<number> {
  const size = await stat(input.path).then(
    (s) => s.size,
    () => {
      throw new Error(`Model file not found or not readable: ${input.path}`);
    },
  );
  // Checked first, so a damaged file fails in the check's one line rather than in a parse error from here; the header
  // the check reads is the one read below (gguf-header.ts), and the engine's load checks it again for nothing.
  await checkGgufFile(input.path);
  const info = await readGgufHeader(input.path);
  const meta = info.metadata as Record<string, any> & { general?: { architecture?: string } };
  const arch = meta[meta.general?.architecture ?? ""] ?? {};
  const heads = first(arch.attention?.head_count) ?? 1;
  const kvHeads = first(arch.attention?.head_count_kv) ?? heads;
  const width = Number(arch.embedding_length ?? 0);
  const keyLength = Number(arch.attention?.key_length ?? width / heads);
  const valueLength = Number(arch.attention?.value_length ?? width / heads);
  const perToken = Number(arch.block_count ?? 0) * kvHeads * (keyLength + valueLength) * 2;
  const auto = input.sequences < 1;
  const sequences = auto ? DEFAULT_SEQUENCES.cpuPerContext * Math.max(1, input.contexts) : input.sequences;
  let kv = perToken * input.contextSize * sequences;
  if (auto) kv = Math.min(kv, usableRam() * CONTEXT_MEMORY_SHARE);
  return size + (Number.isFinite(kv) ? kv : 0) + OVERHEAD_BYTES;
}

function first(v: unknown): number | undefined {
  const n = Array.isArray(v) ? v[0] : v;
  return typeof n === "number" && n > 0 ? n : undefined;
}
