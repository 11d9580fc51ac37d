// Whether a file is a whole GGUF model, from its header alone: the magic, a header node-llama-cpp can read, and
// every tensor's data within the file (a file cut short fails here in one line, not in llama.cpp's loader).
import { open, stat } from "node:fs/promises";
import type { GgufTensorInfo } from "node-llama-cpp";
import { readGgufHeader } from "./gguf-header.js";

/** A model file that cannot be used; the message is one line that names the file. */
export class ModelFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ModelFileError";
  }
}

/**
 * [elements per block, bytes per block] by GGML type id, as llama.cpp's ggml.c declares them (type_traits);
 * tests/engine/gguf-check.int.test.ts holds the table to the native library's own answers. Removed ids are absent.
 */
export const GGML_TYPE_SIZES: Readonly<Record<number, readonly [number, number]>> = {
  0: [1, 4], // F32
  1: [1, 2], // F16
  2: [32, 18], // Q4_0
  3: [32, 20], // Q4_1
  6: [32, 22], // Q5_0
  7: [32, 24], // Q5_1
  8: [32, 34], // Q8_0
  9: [32, 36], // Q8_1
  10: [256, 84], // Q2_K
  11: [256, 110], // Q3_K
  12: [256, 144], // Q4_K
  13: [256, 176], // Q5_K
  14: [256, 210], // Q6_K
  15: [256, 292], // Q8_K
  16: [256, 66], // IQ2_XXS
  17: [256, 74], // IQ2_XS
  18: [256, 98], // IQ3_XXS
  19: [256, 50], // IQ1_S
  20: [32, 18], // IQ4_NL
  21: [256, 110], // IQ3_S
  22: [256, 82], // IQ2_S
  23: [256, 136], // IQ4_XS
  24: [1, 1], // I8
  25: [1, 2], // I16
  26: [1, 4], // I32
  27: [1, 8], // I64
  28: [1, 8], // F64
  29: [256, 56], // IQ1_M
  30: [1, 2], // BF16
  34: [256, 54], // TQ1_0
  35: [256, 66], // TQ2_0
  39: [32, 17], // MXFP4
  40: [64, 36], // NVFP4
  41: [128, 18], // Q1_0
  42: [64, 18], // Q2_0
};

/** A tensor's bytes in the file; undefined for a type this table does not know (a newer llama.cpp's). */
export function tensorBytes(t: Pick<GgufTensorInfo, "dimensions" | "ggmlType">): number | undefined {
  const size = GGML_TYPE_SIZES[t.ggmlType];
  if (!size) return undefined;
  const [block, bytes] = size;
  const [first = 1, ...rest] = t.dimensions.map(Number);
  return Math.ceil(first / block) * bytes * rest.reduce((a, b) => a * b, 1);
}

/** The first bytes of a file that is not a GGUF, as a reader would recognise them (an HTML page, a JSON error). */
function opening(bytes: Buffer): string {
  const text = bytes
    .toString("latin1")
    .replace(/[^\x20-\x7e]+/g, " ")
    .trim();
  return text ? `'${text.slice(0, 24)}'` : `bytes ${bytes.subarray(0, 4).toString("hex")}`;
}

/**
 * Checks `file` before it is loaded or kept: a GGUF whose header reads and whose tensors all lie within it, and
 * `expectedBytes` long when given (what the server announced). Throws ModelFileError, one line naming `label`.
 */
export async function checkGgufFile(file: string, opts: { label?: string; expectedBytes?: number } = {}): Promise<void> {
  const label = opts.label ?? file;
  const size = (await stat(file)).size;
  if (opts.expectedBytes !== undefined && opts.expectedBytes > 0 && size !== opts.expectedBytes)
    throw new ModelFileError(`${label}: has ${size} bytes where ${opts.expectedBytes} were announced; it is incomplete`);
  const head = Buffer.alloc(32);
  const fd = await open(file, "r");
  try {
    await fd.read(head, 0, head.length, 0);
  } finally {
    await fd.close();
  }
  if (size < 4 || head.toString("latin1", 0, 4) !== "GGUF")
    throw new ModelFileError(`${label}: is not a GGUF model (it begins with ${opening(head.subarray(0, Math.min(size, 32)))})`);
  let tensors: readonly GgufTensorInfo[];
  try {
    // This file alone: its tensors are checked against its own size, which needs no other part of a split model.
    const info = await readGgufHeader(file, "this");
    tensors = info.tensorInfo ?? [];
  } catch (err) {
    throw new ModelFileError(`${label}: its GGUF header cannot be read (${oneLine(err)}); the file is damaged or cut short`);
  }
  let end = 0;
  for (const t of tensors) end = Math.max(end, Number(t.fileOffset) + (tensorBytes(t) ?? 0));
  if (end > size) throw new ModelFileError(`${label}: is cut short: its tensors need ${end} bytes and the file has ${size}`);
}

const oneLine = (err: unknown) => (err instanceof Error ? err.message : String(err)).split("\n")[0].slice(0, 200);
