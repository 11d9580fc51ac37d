// A message batch whose requests name different models, as Anthropic allows: each request runs on its own model
// (its answer's `model` says which), through the official client, over a models file with two local models. A
// model that is not served fails the batch, naming the request that asked for it.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testModelPath } from "../../testkit/model.js";
import { startTestService, type TestService } from "../helpers/service.js";

let svc: TestService;
let client: Anthropic;
const dir = mkdtempSync(path.join(os.tmpdir(), "obi-msg-models-"));
beforeAll(async () => {
  const gguf = await testModelPath();
  const file = path.join(dir, "models.yaml");
  writeFileSync(
    file,
    `models:\n  - name: alpha\n    local: { path: ${JSON.stringify(gguf)} }\n  - name: beta\n    aliases: [claude-beta]\n    local: { path: ${JSON.stringify(gguf)} }\n`,
  );
  svc = await startTestService({ MODEL_PATH: "", MODELS_FILE: file });
  client = new Anthropic({ apiKey: "none", baseURL: svc.baseUrl, maxRetries: 0 });
}, 120_000);
afterAll(async () => {
  await svc?.close();
  rmSync(dir, { recursive: true, force: true });
});

const ask = (model: string | undefined) => ({
  ...(model ? { model } : {}),
  max_tokens: 4,
  messages: [{ role: "user" as const, content: "Hello" }],
});

async function ended(id: string) {
  for (let i = 0; i < 600; i++) {
    const b = await client.messages.batches.retrieve(id);
    if (b.processing_status === "ended") return b;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${id} did not end`);
}

describe("a message batch over several models", () => {
  it("runs each request on the model it names, aliases included; one naming none is its own error", async () => {
    const requests = [
      ["a1", "alpha"],
      ["b1", "beta"],
      ["a2", "alpha"],
      ["b2", "claude-beta"],
      ["none", undefined],
      ["a3", "alpha"],
    ] as const;
    const created = await client.messages.batches.create({
      requests: requests.map(([custom_id, model]) => ({ custom_id, params: ask(model) as never })),
    });
    const batch = await ended(created.id);
    expect(batch.request_counts).toMatchObject({ succeeded: 5, errored: 1, processing: 0 });
    const got = new Map<string, any>();
    for await (const line of await client.messages.batches.results(created.id)) got.set(line.custom_id, line.result);
    const modelOf = (id: string) => got.get(id).message.model;
    expect(["a1", "a2", "a3"].map(modelOf)).toEqual(["alpha", "alpha", "alpha"]);
    expect(["b1", "b2"].map(modelOf)).toEqual(["beta", "beta"]);
    expect(got.get("none").type).toBe("errored");
    // Each model's requests ran as shards of their own, on that model.
    const inspect = await (await fetch(`${svc.baseUrl}/console/api/batches/${created.id.replace(/^msgbatch_/, "batch_")}`)).json();
    expect(inspect.shards.length).toBe(2);
  }, 120_000);

  it("fails a batch naming a model that is not served, saying which", async () => {
    const created = await client.messages.batches.create({
      requests: [
        { custom_id: "ok", params: ask("alpha") as never },
        { custom_id: "nope", params: ask("gamma") as never },
      ],
    });
    const batch = await ended(created.id);
    expect(batch.request_counts).toMatchObject({ succeeded: 0, errored: 2 });
    const got: any[] = [];
    for await (const line of await client.messages.batches.results(created.id)) got.push(line);
    expect(got.find((l) => l.custom_id === "nope").result.error.error.message).toMatch(/The model 'gamma' is not served here/);
  }, 60_000);
});
