// Seeded pseudo-random numbers and the random tensor data streamed into generated models.
// xoshiro128** (period 2^128-1) seeded through splitmix32: fast in plain JS, deterministic per seed.

import { toFloat16Bits } from "./float16.js";
import { type GgmlTypeName, Q8_0_BLOCK_BYTES, rowByteLength } from "./format.js";

export interface Rng {
  /** Fills `out` with uniformly distributed u32 values. */
  fillU32(out: Uint32Array): void;
}

export function createRng(seed: number): Rng {
  let sm = seed >>> 0;
  const splitmix = () => {
    sm = (sm + 0x9e3779b9) >>> 0;
    let z = sm;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    return (z ^ (z >>> 16)) >>> 0;
  };
  let a = splitmix(),
    b = splitmix(),
    c = splitmix(),
    d = splitmix();
  return {
    fillU32(out) {
      for (let i = 0; i < out.length; i++) {
        const r = Math.imul(rotl(Math.imul(b, 5), 7), 9);
        const t = b << 9;
        c ^= a;
        d ^= b;
        b ^= c;
        a ^= d;
        c ^= t;
        d = rotl(d, 11);
        out[i] = r;
      }
    },
  };
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}

/** A per-tensor seed, so a tensor's values do not depend on which tensors come before it. */
export function tensorSeed(seed: number, name: string): number {
  let h = 0x811c9dc5 ^ (seed >>> 0); // FNV-1a over the name, keyed by the model seed
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

const CHUNK_BYTES = 4 << 20;

/** Whole rows per chunk, so chunking is fixed by the shape alone (and output stays deterministic). */
function rowsPerChunk(rowBytes: number): number {
  return Math.max(1, Math.floor(CHUNK_BYTES / rowBytes));
}

function* rowChunks(rows: number, rowBytes: number, fill: (bytes: number) => Uint8Array): Iterable<Uint8Array> {
  const step = rowsPerChunk(rowBytes);
  for (let r = 0; r < rows; r += step) yield fill(Math.min(step, rows - r) * rowBytes);
}

/** Random weights with standard deviation `std`, laid out as `rows` rows of `ne0` values. */
export function randomTensorData(type: GgmlTypeName, ne0: number, rows: number, std: number, seed: number) {
  const rng = createRng(seed);
  const rowBytes = rowByteLength(type, ne0);
  switch (type) {
    case "Q8_0":
      return rowChunks(rows, rowBytes, (bytes) => randomQ8_0(rng, bytes, std));
    case "F32":
      return rowChunks(rows, rowBytes, (bytes) => new Uint8Array(randomUniform(rng, bytes / 4, std).buffer));
    case "F16":
      return rowChunks(rows, rowBytes, (bytes) => {
        const values = randomUniform(rng, bytes / 2, std);
        const out = new Uint16Array(values.length);
        for (let i = 0; i < values.length; i++) out[i] = toFloat16Bits(values[i]!);
        return new Uint8Array(out.buffer);
      });
  }
}

/** `count` F32 values all equal to `value` (RMS-norm weights). */
export function* constantF32Data(count: number, value: number): Iterable<Uint8Array> {
  yield new Uint8Array(new Float32Array(count).fill(value).buffer);
}

// Uniform on [-a, a] has standard deviation a / sqrt(3).
function randomUniform(rng: Rng, count: number, std: number): Float32Array {
  const bits = new Uint32Array(count);
  rng.fillU32(bits);
  const out = new Float32Array(count);
  const scale = (2 * Math.sqrt(3) * std) / 2 ** 32;
  const shift = Math.sqrt(3) * std;
  for (let i = 0; i < count; i++) out[i] = bits[i]! * scale - shift;
  return out;
}

// Random bytes are used as the int8 quants directly (uniform on [-128, 127], sd ~73.9),
// and every block shares one scale: exact Q8_0 without ever materialising floats.
const INT8_UNIFORM_SD = Math.sqrt((256 * 256 - 1) / 12);

function randomQ8_0(rng: Rng, bytes: number, std: number): Uint8Array {
  const words = new Uint32Array(Math.ceil(bytes / 4));
  rng.fillU32(words);
  const out = new Uint8Array(words.buffer, 0, bytes);
  const scale = toFloat16Bits(std / INT8_UNIFORM_SD);
  const lo = scale & 0xff;
  const hi = scale >>> 8;
  for (let at = 0; at < bytes; at += Q8_0_BLOCK_BYTES) {
    out[at] = lo;
    out[at + 1] = hi;
  }
  return out;
}
