// Prefix routing in front of an upstream (upstream/slot-affinity.ts): the slot pinning itself, and a real
// llama-server fed a batch of prompt families, whose own per-request timings say how many prompt tokens it
// evaluated. Skipped, with a note, where no llama-server build exists (bash scripts/build-llama-server.sh).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cachedLlamaServer, drivePlanned, evaluatedPromptTokens, plannedRuns, startLlamaServer } from "../../testkit/llama-server.js";
import { testModelPath } from "../../testkit/model.js";
import { resolveRouting, SlotAffinity, slotsFromProps } from "../../upstream/slot-affinity.js";
import { createBatch, isFinal, pollBatch, resultLines, uploadJsonl } from "../helpers/http-batches.js";
import { scratchDir } from "../helpers/scratch.js";
import { startTestService, type TestService } from "../helpers/service.js";

const body = (family: string, i: number) => ({ prompt: `${family.repeat(70)} question ${i}` });

describe("resolveRouting", () => {
  const urls = ["http://a/v1", "http://b/v1"];
  it("auto: slots where a server's /props names them, none where it answers otherwise, and asks again when none answers", async () => {
    const llama = await resolveRouting("auto", urls, 4, async (u) => (u === "http://b/v1" ? { body: { total_slots: 6 } } : undefined));
    expect(llama).toMatchObject({ resolved: { policy: "slots", slots: 6 }, settled: true });
    expect(llama.slots?.count).toBe(6);
    expect(await resolveRouting("auto", urls, 4, async () => ({ body: undefined }))).toMatchObject({
      resolved: { policy: "none" },
      settled: true,
    });
    expect(await resolveRouting("auto", urls, 4, async () => undefined)).toMatchObject({ resolved: { policy: "none" }, settled: false });
  });

  it("slots without a count from the server pins over max_in_flight; grouped and none ask nothing", async () => {
    const asked: string[] = [];
    const probe = async (u: string) => {
      asked.push(u);
      return undefined;
    };
    expect(await resolveRouting("slots", urls, 4, probe)).toMatchObject({ resolved: { policy: "slots", slots: 4 }, settled: true });
    asked.length = 0;
    expect(await resolveRouting("grouped", urls, 4, probe)).toMatchObject({ resolved: { policy: "grouped" } });
    expect(await resolveRouting("none", urls, 4, probe)).toMatchObject({ resolved: { policy: "none" } });
    expect(asked).toEqual([]);
  });
});

describe("SlotAffinity", () => {
  const family = (slots: SlotAffinity, name: string) => slots.familyOf(body(name, 1));

  it("reads a family from the prompt's opening; a short prompt is a family of its own; /props names the slots", () => {
    const slots = new SlotAffinity(2);
    expect(slots.familyOf(body("A", 1))).toBe(slots.familyOf(body("A", 2)));
    expect(slots.familyOf(body("A", 1))).not.toBe(slots.familyOf(body("B", 1)));
    // A short prompt is a family of its own, each time: it still holds (and is pinned to) a slot.
    const short = [slots.familyOf({ prompt: "short" }), slots.familyOf({ prompt: "short" })];
    expect(short[0]).not.toBe(short[1]);
    expect(short).not.toContain(0);
    expect(short).not.toContain(slots.familyOf(body("A", 1)));
    expect(slotsFromProps({ total_slots: 8 })).toBe(8);
    expect(slotsFromProps({ total_slots: 0 })).toBeUndefined();
    expect(slotsFromProps("not found")).toBeUndefined();
  });

  it("keeps a family on the slots it holds, spreads a family over free slots, and lets no slot idle while lines wait", async () => {
    const slots = new SlotAffinity(3);
    const [a, b, c] = ["A", "B", "C"].map((n) => family(slots, n));
    const a0 = await slots.acquire(a);
    const a1 = await slots.acquire(a);
    expect(a1).not.toBe(a0);
    const b0 = await slots.acquire(b);
    expect(new Set([a0, a1, b0]).size).toBe(3);
    // Every slot is busy: A's next line waits; B's slot, freed with nothing queued for it, takes that line.
    const next = slots.acquire(a);
    slots.release(b0, b);
    expect(await next).toBe(b0);
    const waitingC = slots.acquire(c);
    slots.release(a1, a);
    expect(await waitingC).toBe(a1);
    // A free slot of the family's own comes before any other.
    slots.release(a0, a);
    expect(await slots.acquire(a)).toBe(a0);
    // C is done: its slot is spare, and a new family takes it at once.
    slots.release(a1, c);
    expect(await slots.acquire(family(slots, "D"))).toBe(a1);
  });

  it("a family holding no slot follows whichever family runs out of work first, and its later lines follow it there", async () => {
    const slots = new SlotAffinity(2);
    const [a, b, c, d] = ["A", "B", "C", "D"].map((n) => family(slots, n));
    const onA = await slots.acquire(a);
    const onB = await slots.acquire(b);
    const nextA = slots.acquire(a);
    const c1 = slots.acquire(c);
    const c2 = slots.acquire(c);
    // B ends first (A still has a line queued): C takes B's slot, and C's second line waits there, not behind A.
    slots.release(onB, b);
    expect(await c1).toBe(onB);
    const d1 = slots.acquire(d);
    slots.release(onA, a);
    expect(await nextA).toBe(onA);
    // A is done: its slot goes to the next family waiting, D, while C keeps its own.
    slots.release(onA, a);
    expect(await d1).toBe(onA);
    slots.release(onB, c);
    expect(await c2).toBe(onB);
  });

  it("a line never waits while a slot idles, even one whose family still runs elsewhere", async () => {
    const slots = new SlotAffinity(2);
    const [a, b] = ["A", "B"].map((n) => family(slots, n));
    const first = await slots.acquire(a);
    const second = await slots.acquire(a);
    slots.release(second, a);
    expect(await slots.acquire(b)).toBe(second);
    slots.release(first, a);
  });

  it("a wait aborted leaves the queue, and the slot goes to the next line", async () => {
    const slots = new SlotAffinity(1);
    const a = family(slots, "A");
    const s = await slots.acquire(a);
    const aborted = new AbortController();
    const gone = slots.acquire(a, aborted.signal);
    const after = slots.acquire(a);
    aborted.abort();
    await expect(gone).rejects.toThrow();
    slots.release(s, a);
    expect(await after).toBe(s);
    // So does a wait of a family that holds no slot.
    const b = family(slots, "B");
    const cancelled = new AbortController();
    const goneB = slots.acquire(b, cancelled.signal);
    const afterB = slots.acquire(b);
    cancelled.abort();
    await expect(goneB).rejects.toThrow();
    slots.release(s, a);
    expect(await afterB).toBe(s);
  });
});

describe("plannedRuns (the bench's planned feed)", () => {
  const req = (family: string, i: number) => ({ url: "/v1/completions" as const, body: body(family, i) });

  it("puts every line in one run, families together in the order first seen, and the runs' counts within one", () => {
    const shuffled = [0, 1, 2, 3, 4, 5, 6].flatMap((i) => ["A", "B", "C"].map((f) => req(f, i))).reverse();
    const runs = plannedRuns(shuffled, 4);
    expect(runs.map((r) => r.length)).toEqual([5, 5, 5, 6]);
    const flat = runs.flat();
    expect(new Set(flat)).toEqual(new Set(shuffled));
    const families = flat.map((r) => (r.body.prompt as string)[0]);
    expect(families.join("")).toBe(`${"C".repeat(7)}${"B".repeat(7)}${"A".repeat(7)}`);
    // More slots than lines: the spare runs are empty, none holds a line twice.
    expect(plannedRuns(shuffled.slice(0, 2), 4).map((r) => r.length)).toEqual([0, 1, 0, 1]);
  });
});

const binary = cachedLlamaServer();
if (!binary)
  console.warn(
    "tests/upstream/prefix-routing.sys.test.ts: the llama-server part is skipped: no build (bash scripts/build-llama-server.sh makes one)",
  );

let upstream: Awaited<ReturnType<typeof startLlamaServer>>;
const services: TestService[] = [];
const scratch = scratchDir("obi-routing");
beforeAll(async () => {
  if (!binary) return;
  upstream = await startLlamaServer(binary, await testModelPath(), { parallel: 4, threads: 1, ctxPerSlot: 512 });
}, 120_000);
afterAll(async () => {
  for (const s of services.splice(0)) await s.close();
  await upstream?.stop();
});

async function serviceRouting(routing: string): Promise<TestService> {
  const extra = routing === "auto" ? "" : `, prefix_routing: ${routing}`;
  const file = await scratch.write(
    `models:\n  - { name: remote, upstream: { base_urls: ["${upstream.baseUrl}/v1"], model: m, max_in_flight: 4${extra} } }\n`,
    "models.yaml",
  );
  const svc = await startTestService({ MODEL_PATH: "", MODELS_FILE: file });
  services.push(svc);
  return svc;
}

const FOUR = ["Lily", "Tom", "Ben", "Sue"];

/**
 * Families of `size` lines (4 of 8 by default), each opening with its own preamble of a few hundred tokens, grouped
 * by family in the file. Each run's preambles are new to the server (its prompt cache outlives a batch).
 */
let runs = 0;
const familyJsonl = (names = FOUR, size = 8, maxTokens = (_f: number, _i: number) => 4) => {
  const run = runs++;
  return names
    .map((n) => `Run ${run}. ${n} and the dog went to the park. `.repeat(18))
    .flatMap((p, f) =>
      Array.from({ length: size }, (_, i) => line(`f${f}-${i}`, `${p}Question ${i}: where is the ball? Answer:`, maxTokens(f, i))),
    )
    .join("\n");
};

const line = (id: string, prompt: string, maxTokens: number) =>
  JSON.stringify({
    custom_id: id,
    method: "POST",
    url: "/v1/completions",
    body: { model: "remote", prompt, max_tokens: maxTokens, temperature: 0 },
  });

/** The batch run to its end through the service; its output lines. */
async function run(svc: TestService, jsonl: string): Promise<any[]> {
  const file = await uploadJsonl(svc.baseUrl, jsonl);
  const created = await createBatch(svc.baseUrl, file.id);
  const batch = await pollBatch(svc.baseUrl, created.body.id, isFinal, 120_000);
  expect(batch.status).toBe("completed");
  expect(batch.request_counts.failed).toBe(0);
  return resultLines(svc.batchDir, batch.id).output;
}

/** Prompt tokens llama-server evaluated for the batch, from its own `timings` in each answer. */
async function evaluated(
  svc: TestService,
  ...shape: Parameters<typeof familyJsonl>
): Promise<{ evaluated: number; prompt: number; lines: number }> {
  const lines = await run(svc, familyJsonl(...shape));
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

  it("more families than slots: each family stays on the slot it starts on, so each preamble is still evaluated about once", async () => {
    const names = ["Ann", "Bob", "Cat", "Dan", "Eve", "Fay", "Gus", "Hal", "Ivy", "Jon", "Kim", "Leo"];
    // Answers of 1 to 24 tokens, so families end at different times and a new family's slot is not the obvious one.
    const run = await evaluated(await serviceRouting("auto"), names, 3, (f, i) => 1 + ((f * 7 + i * 11) % 24));
    console.log(`prefix routing, 12 families on 4 slots: evaluated ${run.evaluated} of ${run.prompt} prompt tokens`);
    expect(run.lines).toBe(36);
    const perLine = run.prompt / 36;
    // A family split over two slots would pay its preamble twice; 12 preambles, each line's tail, a prompt per slot.
    expect(run.evaluated).toBeLessThan(12 * (perLine - 12) + 36 * 16 + 4 * perLine);
  });

  it("a line too short to have a family is pinned too: the server places no line itself, where a pinned line would wait", async () => {
    const svc = await serviceRouting("auto");
    const short = Array.from({ length: 6 }, (_, i) => line(`short-${i}`, `Tom had a ball ${i}.`, 3 + 5 * i));
    const from = upstream.log().length;
    expect(await run(svc, [familyJsonl(FOUR, 3), ...short].join("\n"))).toHaveLength(18);
    const chosen = [
      ...upstream
        .log()
        .slice(from)
        .matchAll(/selected slot by (\w+)/g),
    ].map((m) => m[1]);
    expect(chosen.filter((how) => how === "id")).toHaveLength(18);
    expect(chosen.filter((how) => how !== "id")).toEqual([]);
  });

  it("the planned feed sends each run to its own slot: each preamble is evaluated about once", async () => {
    const requests = JSON.parse(`[${familyJsonl(FOUR, 6).split("\n").join(",")}]`).map((l: { url: string; body: object }) => ({
      url: l.url,
      body: { ...l.body, model: "m" },
    }));
    const from = upstream.log().length;
    const r = await drivePlanned(upstream.baseUrl, requests.reverse(), 4);
    const evaluatedTokens = evaluatedPromptTokens(upstream.log().slice(from))!;
    const perLine = r.promptTokens / 24;
    // 4 families of 6 over 4 slots: runs of 6 lines, each of one family, so each preamble once and each line's tail.
    expect(evaluatedTokens).toBeLessThan(4 * perLine + 24 * 16);
    expect(r.generated).toBe(24 * 4);
  });

  it("none feeds the file's order: families arrive together and slots repeat the preamble", async () => {
    const routed = await evaluated(await serviceRouting("slots"));
    const plain = await evaluated(await serviceRouting("none"));
    console.log(`prefix routing: slots evaluated ${routed.evaluated} of ${routed.prompt} prompt tokens, none ${plain.evaluated}`);
    expect(routed.evaluated).toBeLessThan(plain.evaluated);
  });
});
