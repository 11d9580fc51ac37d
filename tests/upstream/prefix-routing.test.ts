// Prefix routing in front of an upstream (upstream/slot-affinity.ts): the slot pinning itself, and a real
// llama-server fed a batch of prompt families, whose own per-request timings say how many prompt tokens it
// evaluated. Skipped, with a note, where no llama-server build exists (bash scripts/build-llama-server.sh).
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cachedLlamaServer, startLlamaServer } from "../../testkit/llama-server.js";
import { testModelPath } from "../../testkit/model.js";
import { SlotAffinity, slotsFromProps } from "../../upstream/slot-affinity.js";
import { createBatch, isFinal, pollBatch, resultLines, uploadJsonl } from "../helpers/http-batches.js";
import { startTestService, type TestService } from "../helpers/service.js";

const body = (family: string, i: number) => ({ prompt: `${family.repeat(70)} question ${i}` });

describe("SlotAffinity", () => {
  it("pins a family to one slot, sends a new family to the slot with the least waiting, and leaves short prompts free", () => {
    const slots = new SlotAffinity(2);
    const a = slots.slotFor(body("A", 1));
    expect(slots.slotFor(body("A", 2))).toBe(a);
    expect(slots.slotFor({ prompt: "short" })).toBeUndefined();
    expect(slotsFromProps({ total_slots: 8 })).toBe(8);
    expect(slotsFromProps({ total_slots: 0 })).toBeUndefined();
    expect(slotsFromProps("not found")).toBeUndefined();
  });

  it("runs one line at a time per slot, in arrival order, and an aborted wait leaves the queue", async () => {
    const slots = new SlotAffinity(2);
    const order: string[] = [];
    await slots.acquire(0);
    // Work on slot 0 makes a new family go to slot 1.
    expect(slots.slotFor(body("B", 1))).toBe(1);
    const aborted = new AbortController();
    const second = slots.acquire(0).then(() => order.push("second"));
    const gone = slots.acquire(0, aborted.signal).catch(() => order.push("aborted"));
    const third = slots.acquire(0).then(() => order.push("third"));
    expect(slots.slotFor(body("C", 1))).toBe(1);
    aborted.abort();
    await gone;
    slots.release(0);
    await second;
    expect(order).toEqual(["aborted", "second"]);
    slots.release(0);
    await third;
    expect(order).toEqual(["aborted", "second", "third"]);
    slots.release(0);
  });
});

const binary = cachedLlamaServer();
if (!binary)
  console.warn(
    "tests/upstream/prefix-routing.test.ts: the llama-server part is skipped: no build (bash scripts/build-llama-server.sh makes one)",
  );

let upstream: Awaited<ReturnType<typeof startLlamaServer>>;
const services: TestService[] = [];
beforeAll(async () => {
  if (!binary) return;
  upstream = await startLlamaServer(binary, await testModelPath(), { parallel: 4, threads: 1, ctxPerSlot: 512 });
}, 120_000);
afterAll(async () => {
  for (const s of services.splice(0)) await s.close();
  await upstream?.stop();
});

async function serviceRouting(routing: string): Promise<TestService> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "obi-routing-"));
  const file = path.join(dir, "models.yaml");
  const extra = routing === "auto" ? "" : `, prefix_routing: ${routing}`;
  writeFileSync(
    file,
    `models:\n  - { name: remote, upstream: { base_urls: ["${upstream.baseUrl}/v1"], model: m, max_in_flight: 4${extra} } }\n`,
  );
  const svc = await startTestService({ MODEL_PATH: "", MODELS_FILE: file });
  services.push(svc);
  return svc;
}

/**
 * 4 families of 8 lines, each opening with its own preamble of a few hundred tokens, grouped by family in the
 * file. Each run's preambles are new to the server (its prompt cache outlives a batch).
 */
let runs = 0;
const familyJsonl = () => {
  const run = runs++;
  return ["Lily", "Tom", "Ben", "Sue"]
    .map((n) => `Run ${run}. ${n} and the dog went to the park. `.repeat(18))
    .flatMap((p, f) =>
      Array.from({ length: 8 }, (_, i) =>
        JSON.stringify({
          custom_id: `f${f}-${i}`,
          method: "POST",
          url: "/v1/completions",
          body: { model: "remote", prompt: `${p}Question ${i}: where is the ball? Answer:`, max_tokens: 4, temperature: 0 },
        }),
      ),
    )
    .join("\n");
};

/** Prompt tokens llama-server evaluated for the batch, from its own `timings` in each answer. */
async function evaluated(svc: TestService): Promise<{ evaluated: number; prompt: number; lines: number }> {
  const file = await uploadJsonl(svc.baseUrl, familyJsonl());
  const created = await createBatch(svc.baseUrl, file.id);
  const batch = await pollBatch(svc.baseUrl, created.body.id, isFinal, 120_000);
  expect(batch.status).toBe("completed");
  const lines = resultLines(svc.batchDir, batch.id).output;
  let [evaluatedTokens, prompt] = [0, 0];
  for (const l of lines) {
    const b = l.response.body as { timings?: { prompt_n?: number }; usage: { prompt_tokens: number } };
    evaluatedTokens += b.timings?.prompt_n ?? Number.NaN;
    prompt += b.usage.prompt_tokens;
  }
  return { evaluated: evaluatedTokens, prompt, lines: lines.length };
}

describe.skipIf(!binary)("prefix routing in front of a real llama-server", () => {
  it("auto reads the server's slots from /props and pins each family to one: each preamble is evaluated about once", async () => {
    const svc = await serviceRouting("auto");
    const run = await evaluated(svc);
    expect(run.lines).toBe(32);
    const perLine = run.prompt / 32;
    const preamble = perLine - 12;
    // Each family's preamble once (4), plus each line's own tail; a slot's first line of a new family also
    // pays its whole prompt, which the bound allows once per slot.
    expect(run.evaluated).toBeLessThan(4 * preamble + 32 * 16 + 4 * perLine);
    expect(run.evaluated).toBeLessThan(run.prompt / 3);
  });

  it("none feeds the file's order: families arrive together and slots repeat the preamble", async () => {
    const routed = await evaluated(await serviceRouting("slots"));
    const plain = await evaluated(await serviceRouting("none"));
    console.log(`prefix routing: slots evaluated ${routed.evaluated} of ${routed.prompt} prompt tokens, none ${plain.evaluated}`);
    expect(routed.evaluated).toBeLessThan(plain.evaluated);
  });
});
