// GGUF v3 on-disk constants and the byte sizes of the tensor types this project writes.
// Reference: ggml's docs/gguf.md and ggml.h (type ids are part of the file format).

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
export const GGUF_VERSION = 3;
export const GGUF_ALIGNMENT = 32;

/** Metadata value type ids (gguf_type). */
export const GgufValueType = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
} as const;

/** The tensor types we can generate, with their ggml_type ids. */
export const GgmlType = { F32: 0, F16: 1, Q8_0: 8 } as const;
export type GgmlTypeName = keyof typeof GgmlType;

/** llama_ftype values for general.file_type. */
export const LlamaFileType: Record<GgmlTypeName, number> = { F32: 0, F16: 1, Q8_0: 7 };

/** Q8_0: one f16 scale followed by 32 signed bytes. */
export const Q8_0_BLOCK_VALUES = 32;
export const Q8_0_BLOCK_BYTES = 2 + Q8_0_BLOCK_VALUES;

/** Bytes one row of `ne0` values takes in the given type; throws when ne0 does not fit its block size. */
export function rowByteLength(type: GgmlTypeName, ne0: number): number {
  switch (type) {
    case "F32":
      return ne0 * 4;
    case "F16":
      return ne0 * 2;
    case "Q8_0":
      if (ne0 % Q8_0_BLOCK_VALUES !== 0) {
        throw new Error(`Q8_0 rows need a multiple of ${Q8_0_BLOCK_VALUES} values, got ${ne0}`);
      }
      return (ne0 / Q8_0_BLOCK_VALUES) * Q8_0_BLOCK_BYTES;
  }
}

/** Bytes a tensor of these dims (ne0 first, as ggml orders them) takes. */
export function tensorByteLength(type: GgmlTypeName, dims: readonly number[]): number {
  if (dims.length === 0 || dims.some((d) => !Number.isInteger(d) || d <= 0)) {
    throw new Error(`tensor dims must be positive integers, got [${dims.join(", ")}]`);
  }
  const rows = dims.slice(1).reduce((a, b) => a * b, 1);
  return rowByteLength(type, dims[0]!) * rows;
}

export function alignUp(n: number, alignment = GGUF_ALIGNMENT): number {
  return Math.ceil(n / alignment) * alignment;
}
