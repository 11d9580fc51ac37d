// The GGUF check against the native library: its table of GGML type sizes is llama.cpp's own, the shared test model
// passes it, and a file cut short or not a GGUF is refused in one line before llama.cpp is asked to load it, or its
// memory footprint estimated.
import { readFile } from "node:fs/promises";
import { GgmlType } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { estimateFootprint } from "../../engine/load/footprint.js";
import { checkGgufFile, GGML_TYPE_SIZES, ModelFileError } from "../../engine/load/gguf-check.js";
import { loadLlama, loadModel } from "../../engine/load/load.js";
import { testModelPath } from "../../testkit/model.js";
import { scratchDir } from "../helpers/scratch.js";

const scratch = scratchDir("gguf-check");
let llama: Awaited<ReturnType<typeof loadLlama>>;
beforeAll(async () => {
  llama = await loadLlama(false, () => {});
});
afterAll(() => llama?.dispose());

describe("checkGgufFile", () => {
  it("knows every GGML type's block and byte sizes as the native library reports them", () => {
    const bindings = (llama as unknown as { _bindings: Record<string, (t: number) => number | undefined> })._bindings;
    const ids = Object.values(GgmlType).filter((v): v is number => typeof v === "number");
    for (const id of ids) {
      const native = [bindings.getBlockSizeForGgmlType(id), bindings.getTypeSizeForGgmlType(id)];
      // Removed types report no size (0); the table leaves them out.
      if (!native[0]) expect(GGML_TYPE_SIZES[id], GgmlType[id]).toBeUndefined();
      else expect(GGML_TYPE_SIZES[id], GgmlType[id]).toEqual(native);
    }
  });

  it("passes the test model, and refuses a cut one before llama.cpp loads it, in one line", async () => {
    const model = await testModelPath();
    await checkGgufFile(model);
    const bytes = await readFile(model);
    const cut = await scratch.write(bytes.subarray(0, bytes.length - 1000), "cut.gguf");
    const err = await loadModel(llama, cut, () => {}).catch((e: Error) => e);
    expect(err).toBeInstanceOf(ModelFileError);
    expect((err as Error).message).toMatch(/: is cut short: its tensors need \d+ bytes and the file has \d+$/);
    expect((err as Error).message).not.toContain("\n");
    const page = await scratch.write("<!DOCTYPE html><title>404</title>", "page.gguf");
    await expect(loadModel(llama, page, () => {})).rejects.toThrow(/: is not a GGUF model \(it begins with '<!DOCTYPE html><title>40'\)$/);
  });

  it("comes before a model's memory footprint, which a damaged file fails in the same one line", async () => {
    const bytes = await readFile(await testModelPath());
    const cut = await scratch.write(bytes.subarray(0, bytes.length - 1000), "cut-footprint.gguf");
    const sizes = { contextSize: 256, sequences: 2, contexts: 1 };
    await expect(estimateFootprint({ path: cut, ...sizes })).rejects.toThrow(ModelFileError);
    await expect(estimateFootprint({ path: cut, ...sizes })).rejects.toThrow(/: is cut short: its tensors need \d+ bytes/);
    const page = await scratch.write("<!DOCTYPE html><title>404</title>", "page-footprint.gguf");
    await expect(estimateFootprint({ path: page, ...sizes })).rejects.toThrow(/: is not a GGUF model/);
    expect(await estimateFootprint({ path: await testModelPath(), ...sizes })).toBeGreaterThan(bytes.length);
  });
});
