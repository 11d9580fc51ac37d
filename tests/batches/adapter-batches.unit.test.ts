// Which batch files are one batch over a base model and its adapters: lines of a base and its adapters are grouped by
// model (in order of first appearance, each line as written); one model, two bases, a line naming no served model or
// a line that is not JSON leave the file to the admission's validation as it is; a line naming no model beside a
// base and its adapters is refused.
import path from "node:path";
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { parseModelsFile } from "../../backends/registry.js";
import { familyGroups } from "../../batches/adapter-batches.js";
import { FsBlobStore } from "../../stores/fs-blob-store.js";
import { scratchDir } from "../helpers/scratch.js";

const scratch = scratchDir("adapter-batches");

const registry = parseModelsFile(
  `
models:
  - name: base
    local: { path: /m/base.gguf, adapters: [{ name: a1, path: /m/a1.gguf }, { name: a2, aliases: [two], path: /m/a2.gguf }] }
  - name: other
    local: { path: /m/other.gguf, adapters: [{ name: b1, path: /m/b1.gguf }] }
`,
  "/m/models.yaml",
  {},
);
const line = (id: string, model?: string) =>
  JSON.stringify({ custom_id: id, method: "POST", url: "/v1/completions", body: { model, prompt: id } });

async function groupsOf(lines: string[]) {
  const blobs = new FsBlobStore(path.dirname(await scratch.file()));
  await blobs.put("in.jsonl", Readable.from([lines.map((l) => `${l}\n`).join("")]));
  return familyGroups({ blobs, registry }, "in.jsonl");
}

describe("a batch file over a base and its adapters", () => {
  it("is grouped by model, in order of first appearance, aliases under their model", async () => {
    const groups = await groupsOf([line("0", "a1"), line("1", "base"), line("2", "two"), line("3", "a1")]);
    expect(groups?.map((g) => [g.model, g.lines.map((l) => JSON.parse(l).custom_id)])).toEqual([
      ["a1", ["0", "3"]],
      ["base", ["1"]],
      ["a2", ["2"]],
    ]);
    expect(groups?.[0]?.lines[0]).toBe(`${line("0", "a1")}\n`);
  });

  it("is left as it is when it names one model, two bases' families, no model, or a line is not JSON", async () => {
    expect(await groupsOf([line("0", "a1"), line("1", "a1")])).toBeUndefined();
    expect(await groupsOf([line("0", "a1"), line("1", "b1")])).toBeUndefined();
    expect(await groupsOf([line("0", "a1"), line("1")])).toBeUndefined();
    expect(await groupsOf([line("0", "a1"), line("1", "gpt-4o")])).toBeUndefined();
    expect(await groupsOf([line("0", "a1"), "{not json", line("2", "base")])).toBeUndefined();
    // A body that is not an object: validation's invalid body, not a line naming no model.
    const arrayBody = JSON.stringify({ custom_id: "1", method: "POST", url: "/v1/completions", body: [{ model: "a1" }] });
    expect(await groupsOf([line("0", "a1"), arrayBody, line("2", "base")])).toBeUndefined();
    // One model by its name and an alias beside an adapter: validation's mismatched_model, as without the adapter.
    expect(await groupsOf([line("0", "a2"), line("1", "two"), line("2", "base")])).toBeUndefined();
    // A misspelt adapter beside its base: validation names it (model_not_found).
    expect(await groupsOf([line("0", "base"), line("1", "a3"), line("2", "a1")])).toBeUndefined();
  });

  it("is refused, naming the line, when a line names no model beside a base and its adapters", async () => {
    const refused = groupsOf([line("0", "a1"), line("1", "base"), line("2")]);
    await expect(refused).rejects.toMatchObject({
      code: "missing_required_parameter",
      param: "body.model",
      message: "Line 3 names no model: in a batch over a base model and its adapters (a1, base) every line names its own.",
    });
  });
});
