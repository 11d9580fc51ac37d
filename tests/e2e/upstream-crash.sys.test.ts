// kill -9 of the real server process while a batch runs on an upstream model (a real llama-server): the restart
// finishes it, every custom_id exactly once. Skipped, with a note, where no llama-server build exists.
import { writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cachedLlamaServer, startLlamaServer } from "../../testkit/llama-server.js";
import { testModelPath } from "../../testkit/model.js";
import { completionJsonl, customIds } from "../../testkit/workload.js";
import { accountIds, createBatch, isFinal, pollBatch, uploadJsonl } from "../helpers/http-batches.js";
import { serverTestbed } from "../helpers/server-testbed.js";

const binary = cachedLlamaServer();
if (!binary)
  console.warn("tests/e2e/upstream-crash.sys.test.ts skipped: no llama-server build (bash scripts/build-llama-server.sh makes one)");

const bed = serverTestbed("upstream-crash");
let upstream: Awaited<ReturnType<typeof startLlamaServer>>;
let env: Record<string, string>;
beforeAll(async () => {
  if (!binary) return;
  // Two slots: the batch takes long enough to be killed in the middle.
  upstream = await startLlamaServer(binary, await testModelPath(), { parallel: 2, threads: 1, ctxPerSlot: 256 });
  const file = path.join(bed.dir, "models.yaml");
  writeFileSync(file, `models:\n  - { name: remote, upstream: { base_urls: ["${upstream.baseUrl}/v1"], model: m, max_in_flight: 8 } }\n`);
  env = { MODEL_PATH: "", MODELS_FILE: file };
}, 120_000);
afterAll(() => upstream?.stop());

const N = 240;

describe.skipIf(!binary)("crash recovery on an upstream model", () => {
  it("finishes the batch after a kill -9, every custom_id exactly once", async () => {
    let s = await bed.start(env);
    const file = await uploadJsonl(s.baseUrl, completionJsonl(N, { prefix: "r", model: "remote", maxTokens: 48, temperature: 1 }));
    const id = (await createBatch(s.baseUrl, file.id)).body.id;
    const first = await pollBatch(s.baseUrl, id, (b) => b.request_counts.completed >= 20, 60_000);
    expect(first.status).toBe("in_progress");
    s.child.kill("SIGKILL");
    await s.exited;

    s = await bed.start(env);
    const done = await pollBatch(s.baseUrl, id, isFinal, 120_000);
    expect(done).toMatchObject({ status: "completed", model: "remote", request_counts: { completed: N, failed: 0, total: N } });
    expect(accountIds(bed.dir, id, customIds("r", N))).toEqual({ duplicated: [], missing: [], lines: N });
    s.child.kill("SIGTERM");
    expect(await s.exited).toBe(0);
  }, 240_000);
});
