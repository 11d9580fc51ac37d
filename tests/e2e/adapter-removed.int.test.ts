// A batch whose adapter is taken out of the models file while it waits: after the restart, the adapter's lines fail
// with model_not_found (claims go by the models served, so they would otherwise wait for ever), the base's lines
// run, and the batch ends, each model's counts its own.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { writeGeneratedLora } from "../../engine/load/generated-lora.js";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";
import { completionLines, jsonl } from "../../testkit/workload.js";
import { isFinal, pollBatch, resultLines, uploadJsonl } from "../helpers/http-batches.js";
import { openaiClient, startTestService } from "../helpers/service.js";

const dir = mkdtempSync(path.join(os.tmpdir(), "obi-adapter-removed-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The models file: the base, and the adapter while it is listed. */
function modelsFile(base: string, withAdapter: boolean): string {
  const file = path.join(dir, "models.yaml");
  const lines = ["models:", "  - name: base", "    local:", `      path: ${base}`, "      sequences: 4", "      context_size: 256"];
  if (withAdapter) lines.push("      adapters:", "        - { name: gone-v1, path: ./gone-v1.gguf }");
  writeFileSync(file, lines.join("\n"));
  return file;
}

describe("an adapter taken out of the models file while its batch waits", () => {
  it("fails the adapter's lines with model_not_found after the restart and ends the batch with the base's answers", async () => {
    const base = await ensureGeneratedModel();
    await writeGeneratedLora(base, path.join(dir, "gone-v1.gguf"), 2);
    const batchDir = path.join(dir, "batches");
    const env = { MODEL_PATH: "", BATCH_DIR: batchDir };
    // One slot, which the base's lines (grouped first) take: the adapter's wait, and the pause keeps them waiting.
    const first = await startTestService({ ...env, MODELS_FILE: modelsFile(base, true), SPOT_CAPACITY: "0", DEDICATED_CAPACITY: "1" });
    const lines = [...completionLines(3, { model: "base", prefix: "b" }), ...completionLines(2, { model: "gone-v1", prefix: "g" })];
    let id: string;
    try {
      const file = await uploadJsonl(first.baseUrl, jsonl(lines));
      id = (await openaiClient(first).batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" })).id;
      expect((await fetch(`${first.baseUrl}/v1/batches/${id}/pause`, { method: "POST" })).status).toBe(200);
    } finally {
      await first.close();
    }

    const second = await startTestService({ ...env, MODELS_FILE: modelsFile(base, false) });
    try {
      expect((await fetch(`${second.baseUrl}/v1/batches/${id}/resume`, { method: "POST" })).status).toBe(200);
      const done = await pollBatch(second.baseUrl, id, isFinal, 60_000);
      expect(done.status).toBe("completed");
      expect(done.request_counts).toEqual({ completed: 3, failed: 2, total: 5 });
      expect(done.usage_by_model["gone-v1"].request_counts).toEqual({ completed: 0, failed: 2, total: 2 });
      expect(done.usage_by_model.base.request_counts).toEqual({ completed: 3, failed: 0, total: 3 });
      const { output, errors } = resultLines(second.batchDir, id);
      expect(output.map((l) => l.custom_id).sort()).toEqual(["b-0", "b-1", "b-2"]);
      expect(errors.map((l) => [l.custom_id, l.error.code])).toEqual([
        ["g-0", "model_not_found"],
        ["g-1", "model_not_found"],
      ]);
      expect(errors[0].error.message).toContain("'gone-v1'");
    } finally {
      await second.close();
    }
  });
});
