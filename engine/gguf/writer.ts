// A small GGUF v3 writer. The header (metadata + tensor infos) is built in one buffer; tensor data
// is streamed chunk by chunk so a multi-hundred-MB model never sits in memory at once.
import { open } from "node:fs/promises";
import {
  alignUp,
  GGUF_ALIGNMENT,
  GGUF_MAGIC,
  GGUF_VERSION,
  GgmlType,
  type GgmlTypeName,
  GgufValueType,
  tensorByteLength,
} from "./format.js";

export type GgufNumberArrayType = "int32" | "uint32" | "float32";

export type GgufValue =
  | { type: "string"; value: string }
  | { type: "uint32" | "int32" | "float32"; value: number }
  | { type: "uint64"; value: bigint }
  | { type: "bool"; value: boolean }
  | { type: "array"; itemType: "string"; value: readonly string[] }
  | { type: "array"; itemType: GgufNumberArrayType; value: ArrayLike<number> };

/** Shorthands for building metadata values. */
export const gguf = {
  string: (value: string): GgufValue => ({ type: "string", value }),
  uint32: (value: number): GgufValue => ({ type: "uint32", value }),
  int32: (value: number): GgufValue => ({ type: "int32", value }),
  float32: (value: number): GgufValue => ({ type: "float32", value }),
  uint64: (value: bigint | number): GgufValue => ({ type: "uint64", value: BigInt(value) }),
  bool: (value: boolean): GgufValue => ({ type: "bool", value }),
  strings: (value: readonly string[]): GgufValue => ({ type: "array", itemType: "string", value }),
  int32s: (value: ArrayLike<number>): GgufValue => ({ type: "array", itemType: "int32", value }),
  uint32s: (value: ArrayLike<number>): GgufValue => ({ type: "array", itemType: "uint32", value }),
  float32s: (value: ArrayLike<number>): GgufValue => ({ type: "array", itemType: "float32", value }),
};

export interface GgufTensor {
  name: string;
  type: GgmlTypeName;
  /** ggml order: ne0 (the contiguous row length) first. */
  dims: readonly number[];
  /**
   * Yields the tensor's bytes in order; together exactly tensorByteLength(type, dims).
   * Each chunk must be a buffer of its own: it is written while the next one is produced.
   */
  data: () => Iterable<Uint8Array>;
}

export interface GgufFile {
  /** Written in insertion order; general.alignment is added when absent. */
  metadata: Record<string, GgufValue>;
  tensors: readonly GgufTensor[];
}

/** Writes `file` to `path` (truncating it) and returns the number of bytes written. */
export async function writeGgufFile(path: string, file: GgufFile): Promise<number> {
  const sizes = tensorSizes(file);
  const header = encodeHeader(file, sizes);
  const handle = await open(path, "w");
  let inFlight: Promise<void> = Promise.resolve();
  try {
    let position = 0;
    const write = async (chunk: Uint8Array) => {
      const at = position;
      position += chunk.byteLength;
      for (let done = 0; done < chunk.byteLength; ) {
        done += (await handle.write(chunk, done, chunk.byteLength - done, at + done)).bytesWritten;
      }
    };
    await write(header);
    for (const [i, tensor] of file.tensors.entries()) {
      const expected = sizes[i]!;
      let written = 0;
      // One write in flight while the next chunk is generated: CPU and disk overlap.
      for (const chunk of tensor.data()) {
        written += chunk.byteLength;
        if (written > expected) break;
        await inFlight;
        inFlight = write(chunk);
      }
      await inFlight;
      if (written !== expected) {
        throw new Error(`tensor ${tensor.name}: data source gave ${written} bytes, expected ${expected}`);
      }
      const padding = alignUp(expected) - expected;
      if (padding > 0) await write(new Uint8Array(padding));
    }
    return position;
  } finally {
    await inFlight.catch(() => {}); // never close under a pending write
    await handle.close();
  }
}

function tensorSizes(file: GgufFile): number[] {
  return file.tensors.map((t) => tensorByteLength(t.type, t.dims));
}

/** Magic, counts, metadata and tensor infos, zero-padded so tensor data starts aligned. */
export function encodeHeader(file: GgufFile, sizes: readonly number[] = tensorSizes(file)): Uint8Array {
  const metadata = withAlignment(file.metadata);
  const out = new ByteBuilder();
  out.u32(GGUF_MAGIC);
  out.u32(GGUF_VERSION);
  out.u64(BigInt(file.tensors.length));
  out.u64(BigInt(Object.keys(metadata).length));
  for (const [key, value] of Object.entries(metadata)) {
    out.string(key);
    writeValue(out, key, value);
  }
  const names = new Set<string>();
  let offset = 0;
  for (const [i, tensor] of file.tensors.entries()) {
    if (names.has(tensor.name)) throw new Error(`duplicate tensor name ${tensor.name}`);
    names.add(tensor.name);
    out.string(tensor.name);
    out.u32(tensor.dims.length);
    for (const d of tensor.dims) out.u64(BigInt(d));
    out.u32(GgmlType[tensor.type]);
    out.u64(BigInt(offset));
    offset += alignUp(sizes[i]!);
  }
  out.zeros(alignUp(out.length) - out.length);
  return out.bytes();
}

function withAlignment(metadata: Record<string, GgufValue>): Record<string, GgufValue> {
  const given = metadata["general.alignment"];
  if (given === undefined) return { ...metadata, "general.alignment": gguf.uint32(GGUF_ALIGNMENT) };
  if (given.type !== "uint32" || given.value !== GGUF_ALIGNMENT) {
    throw new Error(`general.alignment must be uint32 ${GGUF_ALIGNMENT}`);
  }
  return metadata;
}

function writeValue(out: ByteBuilder, key: string, v: GgufValue): void {
  switch (v.type) {
    case "string":
      out.u32(GgufValueType.STRING);
      out.string(v.value);
      return;
    case "uint32":
      out.u32(GgufValueType.UINT32);
      out.u32(checkedInt(key, v.value, 0, 0xffffffff));
      return;
    case "int32":
      out.u32(GgufValueType.INT32);
      out.i32(checkedInt(key, v.value, -0x80000000, 0x7fffffff));
      return;
    case "float32":
      out.u32(GgufValueType.FLOAT32);
      out.f32(v.value);
      return;
    case "uint64":
      out.u32(GgufValueType.UINT64);
      out.u64(v.value);
      return;
    case "bool":
      out.u32(GgufValueType.BOOL);
      out.u8(v.value ? 1 : 0);
      return;
    case "array":
      out.u32(GgufValueType.ARRAY);
      if (v.itemType === "string") {
        out.u32(GgufValueType.STRING);
        out.u64(BigInt(v.value.length));
        for (const s of v.value) out.string(s);
        return;
      }
      writeNumberArray(out, key, v.itemType, v.value);
      return;
  }
}

function writeNumberArray(out: ByteBuilder, key: string, type: GgufNumberArrayType, values: ArrayLike<number>) {
  out.u32(type === "int32" ? GgufValueType.INT32 : type === "uint32" ? GgufValueType.UINT32 : GgufValueType.FLOAT32);
  out.u64(BigInt(values.length));
  for (let i = 0; i < values.length; i++) {
    const x = values[i]!;
    if (type === "int32") out.i32(checkedInt(key, x, -0x80000000, 0x7fffffff));
    else if (type === "uint32") out.u32(checkedInt(key, x, 0, 0xffffffff));
    else out.f32(x);
  }
}

function checkedInt(key: string, x: number, min: number, max: number): number {
  if (!Number.isInteger(x) || x < min || x > max) throw new Error(`metadata ${key}: ${x} is out of range`);
  return x;
}

/** A little-endian append-only byte buffer that grows as needed. */
class ByteBuilder {
  private buf = Buffer.allocUnsafe(1 << 16);
  length = 0;

  private reserve(n: number): number {
    if (this.length + n > this.buf.length) {
      const bigger = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.length + n));
      this.buf.copy(bigger, 0, 0, this.length);
      this.buf = bigger;
    }
    const at = this.length;
    this.length += n;
    return at;
  }
  // reserve() may swap this.buf, so it must run before this.buf is read.
  u8(x: number) {
    const at = this.reserve(1);
    this.buf.writeUInt8(x, at);
  }
  u32(x: number) {
    const at = this.reserve(4);
    this.buf.writeUInt32LE(x, at);
  }
  i32(x: number) {
    const at = this.reserve(4);
    this.buf.writeInt32LE(x, at);
  }
  f32(x: number) {
    const at = this.reserve(4);
    this.buf.writeFloatLE(x, at);
  }
  u64(x: bigint) {
    const at = this.reserve(8);
    this.buf.writeBigUInt64LE(x, at);
  }
  zeros(n: number) {
    const at = this.reserve(n);
    this.buf.fill(0, at, at + n);
  }
  string(s: string) {
    const n = Buffer.byteLength(s, "utf8");
    this.u64(BigInt(n));
    const at = this.reserve(n);
    this.buf.write(s, at, n, "utf8");
  }
  bytes(): Uint8Array {
    return this.buf.subarray(0, this.length);
  }
}
