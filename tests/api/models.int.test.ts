// The model registry through the real service: MODELS_FILE with two local models (and one that cannot load),
// GET /v1/models with the official client, batches routed by their `model`, unknown models refused.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";
import { testModelPath } from "../../testkit/model.js";
import { completionJsonl, customIds } from "../../testkit/workload.js";
import { createBatch, isFinal, pollBatch, resultLines, uploadJsonl } from "../helpers/http-batches.js";
import { scratchDir } from "../helpers/scratch.js";
import { openaiClient, startTestService, type TestService } from "../helpers/service.js";

const scratch = scratchDir("obi-models");
let svc: TestService;
beforeAll(async () => {
  const file = await scratch.write(
    [
      "models:",
      `  - { name: first, aliases: [Qwen/Qwen2.5-0.5B-Instruct], local: { path: ${await testModelPath()}, sequences: 2 } }`,
      `  - { name: second, local: { path: ${await ensureGeneratedModel()}, sequences: 2, context_size: 256 } }`,
      "  - { name: broken, local: { path: ./missing.gguf } }",
    ].join("\n"),
    "models.yaml",
  );
  svc = await startTestService({ MODEL_PATH: "", MODELS_FILE: file });
});
afterAll(() => svc?.close());

async function run(model: string | undefined, prefix: string, n = 6) {
  const file = await uploadJsonl(svc.baseUrl, completionJsonl(n, { prefix, model }));
  const created = await createBatch(svc.baseUrl, file.id);
  expect(created.status).toBe(200);
  return created.body;
}

describe("MODELS_FILE", () => {
  it("lists and finds the models with the official client, by name and by alias", async () => {
    const client = openaiClient(svc);
    const ids: string[] = [];
    for await (const m of client.models.list()) ids.push(m.id);
    expect(ids).toEqual(["first", "second", "broken"]);
    const byAlias = await client.models.retrieve("Qwen/Qwen2.5-0.5B-Instruct");
    expect(byAlias).toMatchObject({ id: "first", object: "model", owned_by: "local" });
    expect(typeof byAlias.created).toBe("number");
    const missing = await client.models.retrieve("gpt-4o").catch((e) => e);
    expect(missing.status).toBe(404);
    expect(missing.error).toMatchObject({ code: "model_not_found", param: "model" });
    // It lists what the list shows: the models, never their aliases.
    expect(missing.error.message).toMatch(/served are: first, second, broken\./);
  });

  it("runs batches for two local models at once, each line served by the model its batch named", async () => {
    const [a, b] = [await run("Qwen/Qwen2.5-0.5B-Instruct", "a"), await run("second", "b")];
    expect([a.model, b.model]).toEqual(["first", "second"]);
    // Both run at once: the second model's batch does not wait for the first's.
    const both = await Promise.all([
      pollBatch(svc.baseUrl, a.id, (x) => x.status !== "validating"),
      pollBatch(svc.baseUrl, b.id, (x) => x.status !== "validating"),
    ]);
    expect(both.map((x) => x.status).every((s) => s === "in_progress" || s === "completed" || s === "finalizing")).toBe(true);
    for (const [batch, name, prefix] of [
      [a, "first", "a"],
      [b, "second", "b"],
    ] as const) {
      const done = await pollBatch(svc.baseUrl, batch.id, isFinal, 60_000);
      expect(done).toMatchObject({ status: "completed", model: name, request_counts: { completed: 6, failed: 0, total: 6 } });
      const lines = resultLines(svc.batchDir, batch.id).output;
      expect(lines.map((l) => l.custom_id).sort()).toEqual(customIds(prefix, 6).sort());
      for (const l of lines) expect(l.response.body.model).toBe(name);
    }
    expect(
      svc.service.models
        .status()
        .filter((m) => m.state === "loaded")
        .map((m) => m.name),
    ).toEqual(["first", "second"]);
    // Each local model runs with the engine options its entry names.
    const settings = new Map(svc.service.models.backends().map((b) => [b.name, b.backend.info.settings]));
    expect(settings.get("first")).toMatchObject({ sequences: 2, contextSize: 512 });
    expect(settings.get("second")).toMatchObject({ sequences: 2, contextSize: 256 });
    const ready = await (await fetch(`${svc.baseUrl}/ready`)).json();
    expect(ready).toMatchObject({ status: "ready", model: "first" });
    expect(ready.models).toEqual([
      { name: "first", kind: "local", state: "loaded", batches: 0 },
      { name: "second", kind: "local", state: "loaded", batches: 0 },
      { name: "broken", kind: "local", state: "unloaded", batches: 0 },
    ]);
  });

  it("fails a batch naming an unknown model at validation, naming the models served", async () => {
    const b = await run("gpt-4o", "u", 2);
    expect(b.status).toBe("failed");
    expect(b.request_counts).toEqual({ completed: 0, failed: 0, total: 0 });
    expect(b.errors.data).toEqual([
      {
        code: "model_not_found",
        line: 1,
        param: "body.model",
        message: "The model 'gpt-4o' is not served here; the models served are: first, second, broken.",
      },
    ]);
  });

  it("fails the batches of a model that cannot load, with the reason, and leaves the others running", async () => {
    const broken = await run("broken", "x", 3);
    const fine = await run("first", "y", 3);
    const [x, y] = await Promise.all([
      pollBatch(svc.baseUrl, broken.id, isFinal, 60_000),
      pollBatch(svc.baseUrl, fine.id, isFinal, 60_000),
    ]);
    expect(x.status).toBe("failed");
    expect(x.request_counts).toEqual({ completed: 0, failed: 3, total: 3 });
    expect(x.errors.data[0].message).toMatch(
      /The model 'broken' could not be loaded: Model file not found or not readable: .*missing\.gguf/,
    );
    expect(y).toMatchObject({ status: "completed", request_counts: { completed: 3, failed: 0, total: 3 } });
  });
});
