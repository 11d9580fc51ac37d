// kill -9 of the real server mid-batch, on a batch whose greedy lines each come three times: after the restart every
// custom_id is in the files once, no prompt is computed twice (the answers stored before the crash are hits after
// it), and cached_lines, the cached input and output tokens equal what the output file's lines say.
import { describe, expect, it } from "vitest";
import { completionJsonl, customIds } from "../../testkit/workload.js";
import { accountIds, createBatch, isFinal, pollBatch, resultLines, uploadJsonl } from "../helpers/http-batches.js";
import { serverTestbed } from "../helpers/server-testbed.js";

const bed = serverTestbed("cached-crash", { SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "0" });
const LINES = 96;
const DISTINCT = 32;

describe("the result cache across a kill -9", () => {
  it("counts every line once and each cached line once, computing no prompt twice", async () => {
    let s = await bed.start();
    const text = completionJsonl(LINES, { prefix: "rep", maxTokens: 100, prompt: (i) => `Once upon a time, story ${i % DISTINCT}:` });
    const file = await uploadJsonl(s.baseUrl, text);
    const created = (await createBatch(s.baseUrl, file.id)).body;
    const before = await pollBatch(s.baseUrl, created.id, (b) => b.request_counts.completed >= 8);
    expect(before.status).toBe("in_progress");
    s.child.kill("SIGKILL");
    await s.exited;
    expect(resultLines(bed.dir, created.id).output.length).toBeLessThan(LINES);

    s = await bed.start();
    const done = await pollBatch(s.baseUrl, created.id, isFinal, 240_000);
    expect(done.status).toBe("completed");
    const ids = accountIds(bed.dir, created.id, customIds("rep", LINES));
    expect(ids).toEqual({ duplicated: [], missing: [], lines: LINES });

    const { output } = resultLines(bed.dir, created.id);
    const cached = output.filter((l) => l.cached);
    const computed = output.filter((l) => !l.cached);
    const promptOf = (l: any) => Number(l.custom_id.split("-")[1]) % DISTINCT;
    expect(new Set(computed.map(promptOf)).size).toBe(computed.length);
    expect(computed.length).toBeLessThanOrEqual(DISTINCT);
    expect(done.request_counts).toEqual({ completed: LINES, failed: 0, total: LINES });
    expect(done.cached_lines).toBe(cached.length);
    const sum = (ls: any[], f: (u: any) => number) => ls.reduce((n, l) => n + f(l.response.body.usage), 0);
    expect(done.usage.input_tokens).toBe(sum(output, (u) => u.prompt_tokens));
    expect(done.usage.input_tokens_details.cached_tokens).toBe(sum(output, (u) => u.prompt_tokens_details?.cached_tokens ?? 0));
    expect(done.usage.output_tokens_details.cached_tokens).toBe(sum(cached, (u) => u.completion_tokens));
  }, 300_000);
});
