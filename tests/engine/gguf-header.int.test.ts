// A GGUF header read once per version of a file while a start needs it: the same read for every caller, a file
// changed under its path read anew, a failed read not kept, and a split model's part read alone when asked.
import { copyFile, readFile, utimes, writeFile } from "node:fs/promises";
import { afterEach, describe, expect, it, vi } from "vitest";
import { HEADER_KEPT_MS, readGgufHeader } from "../../engine/load/gguf-header.js";
import { testModelPath } from "../../testkit/model.js";
import { scratchDir } from "../helpers/scratch.js";

const scratch = scratchDir("gguf-header");

afterEach(() => {
  vi.useRealTimers();
});

describe("readGgufHeader", () => {
  it("reads a file once for all its callers, with its tensors, and forgets it after a while", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout"] });
    const model = await scratch.file("model.gguf");
    await copyFile(await testModelPath(), model);
    const [a, b] = await Promise.all([readGgufHeader(model), readGgufHeader(model)]);
    expect(a).toBe(b);
    expect(a.tensorInfo?.length).toBeGreaterThan(0);
    expect(await readGgufHeader(model, "this")).toBe(a);
    vi.advanceTimersByTime(HEADER_KEPT_MS + 1);
    const again = await readGgufHeader(model);
    expect(again).not.toBe(a);
    expect(again.metadata).toEqual(a.metadata);
  });

  it("reads a file changed under the same path anew", async () => {
    const model = await scratch.file("changing.gguf");
    const bytes = await readFile(await testModelPath());
    await writeFile(model, bytes);
    const before = await readGgufHeader(model);
    // One byte more at its end: another size, so another version of the file.
    await writeFile(model, Buffer.concat([bytes, Buffer.alloc(1)]));
    const longer = await readGgufHeader(model);
    expect(longer).not.toBe(before);
    // Its last byte changed in place, its size kept: another modification time.
    const changed = Buffer.concat([bytes, Buffer.from([1])]);
    await writeFile(model, changed);
    const later = new Date(Date.now() + 5_000);
    await utimes(model, later, later);
    expect(await readGgufHeader(model)).not.toBe(longer);
  });

  it("keeps no failed read: a file that was not a GGUF is read once it is one", async () => {
    const model = await scratch.write("<!DOCTYPE html><title>404</title>", "later.gguf");
    const first = await readGgufHeader(model).catch((e: unknown) => e);
    const second = await readGgufHeader(model).catch((e: unknown) => e);
    expect(first).toBeInstanceOf(Error);
    // Read again, the file unchanged: the failure is the second read's own, not the first one kept.
    expect(second).toBeInstanceOf(Error);
    expect(second).not.toBe(first);
    await copyFile(await testModelPath(), model);
    expect((await readGgufHeader(model)).tensorInfo?.length).toBeGreaterThan(0);
  });

  it("reads a split model's part alone when asked, and spliced with the others otherwise", async () => {
    const part = await scratch.file("model-00001-of-00002.gguf");
    await copyFile(await testModelPath(), part);
    expect((await readGgufHeader(part, "this")).tensorInfo?.length).toBeGreaterThan(0);
    // Its second part is not there: the spliced read fails, where the part alone did not.
    await expect(readGgufHeader(part)).rejects.toThrow();
  });
});
