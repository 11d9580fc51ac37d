// The GGUF writer, read back by node-llama-cpp's own parser, and the generated-model cache.
import { createHash } from "node:crypto";
import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { GgmlType as LlamaGgmlType, readGgufFileInfo } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fromFloat16Bits, toFloat16Bits } from "../../engine/gguf/float16.js";
import { tensorByteLength } from "../../engine/gguf/format.js";
import { getPreset, MODEL_PRESETS } from "../../engine/gguf/presets.js";
import { randomTensorData } from "../../engine/gguf/random.js";
import { type GgufTensor, gguf, writeGgufFile } from "../../engine/gguf/writer.js";
import { ensureGeneratedModel, GENERATED_MODEL_PRESETS, generatedModelFileName } from "../../engine/load/generated-model.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "gguf-writer-test-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const bytesOf =
  (values: Float32Array): GgufTensor["data"] =>
  () => [new Uint8Array(values.buffer)];

describe("writeGgufFile", () => {
  it("writes metadata and tensors that node-llama-cpp's parser reads back", async () => {
    const file = path.join(dir, "handmade.gguf");
    const a = Float32Array.from({ length: 5 }, (_, i) => i + 0.5);
    const bytes = await writeGgufFile(file, {
      metadata: {
        "general.architecture": gguf.string("llama"),
        "general.name": gguf.string("wörld ✓"),
        "test.u32": gguf.uint32(4_000_000_000),
        "test.i32": gguf.int32(-7),
        "test.f32": gguf.float32(0.25),
        "test.bool": gguf.bool(true),
        "test.u64": gguf.uint64(2n ** 40n),
        "test.strings": gguf.strings(["a", "", "Ġb c"]),
        "test.empty": gguf.strings([]),
        "test.ints": gguf.int32s(Int32Array.of(1, -2, 3)),
        "test.floats": gguf.float32s([1.5, -2]),
      },
      tensors: [
        { name: "a", type: "F32", dims: [5], data: bytesOf(a) },
        { name: "q", type: "Q8_0", dims: [64, 3], data: () => randomTensorData("Q8_0", 64, 3, 0.1, 7) },
        { name: "h", type: "F16", dims: [4, 2], data: () => randomTensorData("F16", 4, 2, 0.1, 7) },
      ],
    });
    expect((await stat(file)).size).toBe(bytes);

    const info = await readGgufFileInfo(file, { logWarnings: false });
    expect(info.version).toBe(3);
    const md = info.metadata as unknown as Record<string, Record<string, unknown>>;
    expect(md.general).toMatchObject({ architecture: "llama", name: "wörld ✓", alignment: 32 });
    expect(md.test).toMatchObject({
      u32: 4_000_000_000,
      i32: -7,
      f32: 0.25,
      bool: true,
      strings: ["a", "", "Ġb c"],
      empty: [],
      ints: [1, -2, 3],
      floats: [1.5, -2],
    });
    expect(BigInt(md.test!.u64 as number | bigint)).toBe(2n ** 40n);

    const tensors = info.tensorInfo!;
    expect(tensors.map((t) => [t.name, t.dimensions.map(Number), t.ggmlType])).toEqual([
      ["a", [5], LlamaGgmlType.F32],
      ["q", [64, 3], LlamaGgmlType.Q8_0],
      ["h", [4, 2], LlamaGgmlType.F16],
    ]);
    for (const t of tensors) expect(Number(t.fileOffset) % 32).toBe(0);
    // Last tensor's data (F16, 16 bytes) plus padding ends the file.
    expect(Number(tensors[2]!.fileOffset) + 32).toBe(bytes);

    const raw = await readFile(file);
    const at = Number(tensors[0]!.fileOffset);
    expect(new Float32Array(raw.buffer.slice(raw.byteOffset + at, raw.byteOffset + at + 20))).toEqual(a);
  });

  it("rejects a data source of the wrong length", async () => {
    const write = writeGgufFile(path.join(dir, "short.gguf"), {
      metadata: {},
      tensors: [{ name: "a", type: "F32", dims: [8], data: bytesOf(new Float32Array(7)) }],
    });
    await expect(write).rejects.toThrow(/gave 28 bytes, expected 32/);
  });

  it("rejects shapes a type cannot hold and out-of-range metadata", async () => {
    expect(() => tensorByteLength("Q8_0", [48, 2])).toThrow(/multiple of 32/);
    const write = writeGgufFile(path.join(dir, "bad.gguf"), { metadata: { "x.y": gguf.uint32(-1) }, tensors: [] });
    await expect(write).rejects.toThrow(/x\.y: -1 is out of range/);
  });
});

describe("random tensor data", () => {
  it("is deterministic per seed and has the requested spread", () => {
    const collect = (seed: number) => Buffer.concat([...randomTensorData("F32", 256, 64, 0.02, seed)]);
    expect(collect(3).equals(collect(3))).toBe(true);
    expect(collect(3).equals(collect(4))).toBe(false);
    const v = new Float32Array(collect(3).buffer.slice(0));
    const sd = Math.sqrt(v.reduce((s, x) => s + x * x, 0) / v.length);
    expect(sd).toBeGreaterThan(0.018);
    expect(sd).toBeLessThan(0.022);
  });

  it("encodes float16 scales exactly where representable", () => {
    for (const x of [0, 1, -2, 0.5, 65504, 2 ** -24]) expect(fromFloat16Bits(toFloat16Bits(x))).toBe(x);
    expect(Math.abs(fromFloat16Bits(toFloat16Bits(0.1)) - 0.1)).toBeLessThan(1e-4);
  });
});

describe("ensureGeneratedModel", () => {
  it("writes each preset/seed once, atomically, and reuses the cached file", async () => {
    const cache = path.join(dir, "cache");
    const paths = await Promise.all([1, 2, 3].map(() => ensureGeneratedModel({ dir: cache })));
    expect(new Set(paths).size).toBe(1);
    const file = paths[0]!;
    expect(path.isAbsolute(file)).toBe(true);
    expect(path.basename(file)).toBe(generatedModelFileName(getPreset("tiny"), 1));
    expect(await readdir(cache)).toEqual([path.basename(file)]); // no temp files left behind

    const { mtimeMs } = await stat(file);
    expect(await ensureGeneratedModel({ dir: cache, preset: "tiny" })).toBe(file);
    expect((await stat(file)).mtimeMs).toBe(mtimeMs);

    const other = await ensureGeneratedModel({ dir: cache, seed: 2 });
    expect(other).not.toBe(file);
    const digest = async (f: string) =>
      createHash("sha256")
        .update(await readFile(f))
        .digest("hex");
    expect(await digest(other)).not.toBe(await digest(file));

    // Same preset and seed in another directory: byte-identical.
    const again = await ensureGeneratedModel({ dir: path.join(dir, "cache2") });
    expect(await digest(again)).toBe(await digest(file));
  });

  it("names the content version, so a changed preset gets a new file", () => {
    const tiny = getPreset("tiny");
    expect(generatedModelFileName(tiny, 1)).toMatch(/^tiny-seed1-[0-9a-f]{12}\.gguf$/);
    expect(generatedModelFileName({ ...tiny, blockCount: 3 }, 1)).not.toBe(generatedModelFileName(tiny, 1));
  });

  it("refuses unknown presets and bad seeds with clear errors", async () => {
    expect(GENERATED_MODEL_PRESETS).toEqual(Object.keys(MODEL_PRESETS));
    await expect(ensureGeneratedModel({ dir, preset: "gpt-5" })).rejects.toThrow(/unknown model preset "gpt-5"; choose one of: tiny/);
    await expect(ensureGeneratedModel({ dir, seed: -1 })).rejects.toThrow(/seed must be an integer/);
  });
});
