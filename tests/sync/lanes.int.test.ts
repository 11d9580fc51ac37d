// The lanes on the real engine (four sequences, the test model): the interactive lane runs up to its share of the
// model's sequences at once, and while a batch of the model is at risk of its deadline it gives that share back
// (one request at a time), which is logged and counted once per change.

import client from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LlamaBackend } from "../../engine/adapter/openai-backend.js";
import type { Engine } from "../../engine/types.js";
import { metricKinds } from "../../metrics/kinds.js";
import { createLaneMetrics } from "../../metrics/lane-metrics.js";
import { SyncLanes } from "../../sync/lanes.js";
import { openTestEngine } from "../../testkit/model.js";
import { routerOver } from "../helpers/router.js";

let engine: Engine;
beforeAll(async () => {
  engine = await openTestEngine({ sequences: 4, contextSize: 1024 });
});
afterAll(async () => engine?.close());

describe("the interactive lane's share", () => {
  it("runs up to its share at once, and gives it back while a batch of the model is at risk", async () => {
    const backend = new LlamaBackend(engine);
    const registry = new client.Registry();
    const warnings: unknown[] = [];
    let risky = false;
    const lanes = new SyncLanes(
      routerOver(backend),
      { interactiveMaxShare: 0.5, interactiveQueueMax: 8, flexQueueMax: 8 },
      {
        metrics: createLaneMetrics(metricKinds([registry])),
        atRisk: () => risky,
        logger: { warn: (o: unknown) => warnings.push(o), info: () => {} },
      },
    );
    const ask = () =>
      lanes.run({
        owner: null,
        endpoint: "/v1/completions",
        body: { model: "m", prompt: "Once upon a time", max_tokens: 300, temperature: 1, seed: 1 },
        signal: new AbortController().signal,
      });
    const interactive = () => lanes.lanes().find((l) => l.tier === "default")!;

    const shared = [ask(), ask(), ask()];
    await new Promise((r) => setTimeout(r, 30));
    // Its room is half the model's concurrency (twice its four sequences): all three run.
    expect(interactive()).toMatchObject({ running: 3, waiting: 0, room: 4 });
    await Promise.all(shared);

    risky = true;
    const givenBack = [ask(), ask(), ask()];
    await new Promise((r) => setTimeout(r, 30));
    expect(interactive()).toMatchObject({ running: 1, waiting: 2, room: 1 });
    await Promise.all(givenBack);
    expect(interactive().served).toBe(6);
    expect(warnings).toHaveLength(1);
    const counted = await registry.getSingleMetric("obi_sync_lane_takebacks_total")!.get();
    expect(counted.values.map((v) => v.value)).toEqual([1]);
    risky = false;
    await ask();
    expect(interactive().room).toBe(4);
    // A prompt past the context is the request's fault: a 400 counted as invalid, not as the service failing.
    const long = { model: "m", prompt: "Once upon a time ".repeat(400), max_tokens: 8 };
    await expect(lanes.run({ owner: null, endpoint: "/v1/completions", body: long, signal: new AbortController().signal })).rejects.toThrow(
      /tokens long/,
    );
    const outcomes = (await registry.getSingleMetric("obi_sync_requests_total")!.get()).values.map((v) => v.labels.outcome);
    expect(outcomes).toContain("invalid");
    expect(outcomes).not.toContain("failed");
  });
});
