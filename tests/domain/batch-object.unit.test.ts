// A new batch's errors as its validation and the models served make them: a line naming a model not served here,
// beside lines of another, fails the batch with model_not_found naming it, not as a mix of models.
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { parseModelsFile } from "../../backends/registry.js";
import { newBatchObject } from "../../domain/batch-object.js";
import { validateBatchFile } from "../../pipeline/validate.js";

const registry = parseModelsFile(
  "models:\n  - name: base\n    local: { path: /m/base.gguf, adapters: [{ name: a1, path: /m/a1.gguf }] }\n",
  "/m/models.yaml",
  {},
);
const line = (id: string, model: string) =>
  JSON.stringify({ custom_id: id, method: "POST", url: "/v1/completions", body: { model, prompt: id } });

async function batchOf(models: string[]) {
  const text = models.map((m, i) => `${line(String(i), m)}\n`).join("");
  const validation = await validateBatchFile(Readable.from([Buffer.from(text)]), "/v1/completions", {
    maxRequests: 100,
    maxLineBytes: 10_000,
  });
  return newBatchObject({
    id: "batch_000000000000000000000001",
    endpoint: "/v1/completions",
    completion_window: "24h",
    inputFileId: "file-x",
    created: 1,
    windowSeconds: 86_400,
    validation,
    registry,
  });
}

describe("a new batch's errors", () => {
  it("name a misspelt model beside a served one as model_not_found, wherever it stands", async () => {
    for (const models of [
      ["base", "a3", "a3"],
      ["a3", "base", "a1"],
    ]) {
      const batch = await batchOf(models);
      expect(batch.status).toBe("failed");
      expect(batch.errors?.data).toEqual([
        expect.objectContaining({ code: "model_not_found", line: models.indexOf("a3") + 1, param: "body.model" }),
      ]);
      expect(batch.errors?.data[0].message).toMatch(/^The model 'a3' is not served here; the models served are: base, a1\.$/);
    }
  });

  it("keep the mismatch where both models are served", async () => {
    const batch = await batchOf(["base", "a1"]);
    expect(batch.errors?.data.map((e) => e.code)).toEqual(["mismatched_model"]);
  });
});
