// A client's dataset read cannot exhaust the server: a `where` whose one function call builds gigabytes, or runs for
// seconds where DuckDB cannot interrupt it, is stopped in the read's own process and answered with a 400 naming the
// where and the setting that bounds it, while the server (as `npm start` runs it) stays small and up and an
// ordinary batch beside it completes; the table's join is bounded the same way.
import { readFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import { isFinal, pollBatch, uploadText } from "../../testkit/batch-client.js";
import { createFromDataset } from "../helpers/dataset-batches.js";
import type { ServerProcess } from "../helpers/process.js";
import { serverTestbed } from "../helpers/server-testbed.js";

// The kernel's data limit and /proc, which the server's watch and this test read, are Linux's.
const linux = process.platform === "linux";
if (!linux) console.warn("dataset-read-limits.test: skipped, it needs Linux (RLIMIT_DATA, /proc)");
const ONE_ROW = "id,lang,review_text\n1,en,Great\n";
const NESTED_HEX = Array.from({ length: 30 }).reduce<string>((inner) => `hex(${inner})`, "review_text");

/** A field of /proc/<pid>/status, in MiB. */
const statusMb = (pid: number, field: string) =>
  Number(new RegExp(`^${field}:\\s+(\\d+)`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]) / 1024;
/** The dataset reads' processes `pid` started that are still running. */
function readProcessesOf(pid: number): string[] {
  const cmdline = (child: string) => {
    try {
      return readFileSync(`/proc/${child}/cmdline`, "utf8");
    } catch {
      return "";
    }
  };
  return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
    .trim()
    .split(/\s+/)
    .filter((child) => child && cmdline(child).includes("dataset-jobs/read-child"));
}

async function ordinaryBatch(base: string): Promise<string> {
  const res = await fetch(`${base}/v1/batches`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ input: Array.from({ length: 8 }, (_, i) => ({ prompt: `Once upon a time ${i}` })), max_tokens: 24 }),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { id: string }).id;
}

describe.skipIf(!linux)("a dataset read's memory and time, bounded in a process of its own", () => {
  const testbed = serverTestbed("dataset-limits");
  let server: ServerProcess;
  let input: string;
  // Memory is the only bound the first test meets: a loaded machine takes seconds to build what a read may not hold,
  // and a step bound of 1 s would stop it for time first. The second test's server bounds a step at 1 s.
  beforeAll(async () => {
    server = await testbed.start({ DATASET_READ_MEMORY_MB: "512", DATASET_STEP_SECONDS: "60" });
    input = (await uploadText(server.baseUrl, ONE_ROW, { filename: "one.csv" })).id;
  });

  it("answers a where that builds more than a read may hold with a 400 naming it, and the server stays small and serves", async () => {
    const base = server.baseUrl;
    const batch = await ordinaryBatch(base);
    const wheres = [
      "len(range(60000000)) > 0",
      "length(repeat(review_text, 300000000)) > 0",
      "len(range(1000000000)) > 0",
      `length(${NESTED_HEX}) > 0`,
    ];
    const answers = await Promise.all(wheres.map((where) => createFromDataset(base, input, { prompt: "{{review_text}}", where })));
    for (const [i, a] of answers.entries()) {
      expect(a.status, wheres[i]).toBe(400);
      expect(a.body.error, wheres[i]).toMatchObject({ type: "invalid_request_error", code: "invalid_dataset", param: "job.where" });
      expect(a.body.error.message, wheres[i]).toMatch(
        /^where: it needed more memory or scratch disk than one dataset read may take here \(DATASET_READ_MEMORY_MB=512, DATASET_SCRATCH_MB=\d+\), so it was stopped \(a costly where\?\)$/,
      );
    }
    // A read's process has ended when its read is answered; at most the one started ahead for the next read is up.
    expect(readProcessesOf(server.child.pid!).length).toBeLessThanOrEqual(1);
    // In the server's own process each of these took gigabytes (range: 4.7 GB resident): here none reached it.
    expect(statusMb(server.child.pid!, "VmHWM")).toBeLessThan(1024);
    const done = await pollBatch(base, batch, isFinal, { timeoutMs: 120_000 });
    expect(done).toMatchObject({ status: "completed", request_counts: { total: 8, completed: 8, failed: 0 } });
    const ok = await createFromDataset(base, input, { prompt: "{{review_text}}", where: "lang = 'en'", params: { max_tokens: 2 } });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
  });

  it("kills a read whose one call runs past its step, where DuckDB cannot interrupt it, with a 400 naming the where", async () => {
    server.child.kill("SIGTERM");
    await server.exited;
    server = await testbed.start({ DATASET_READ_MEMORY_MB: "512", DATASET_STEP_SECONDS: "1" });
    const base = server.baseUrl;
    const batch = await ordinaryBatch(base);
    const where = "levenshtein(repeat(review_text, 20000), repeat(lang, 20000)) < 0";
    const r = await createFromDataset(base, input, { prompt: "{{review_text}}", where });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ code: "invalid_dataset", param: "job.where" });
    expect(r.body.error.message).toBe(
      "where: it took longer than 1 s, the most one step of a dataset read may take here (DATASET_STEP_SECONDS), so it was stopped (a costly where?)",
    );
    expect(await pollBatch(base, batch, isFinal, { timeoutMs: 120_000 })).toMatchObject({ status: "completed" });
    expect(readProcessesOf(server.child.pid!).length).toBeLessThanOrEqual(1);
    // Killed from outside: DuckDB could not interrupt the call.
    expect(server.output()).toMatch(/"bound":"time".*"msg":"a dataset read was stopped at a limit"/);
    expect((await fetch(`${base}/health`)).status).toBe(200);
  });
});

describe.skipIf(!linux)("the table's join, bounded as the create's read", () => {
  const testbed = serverTestbed("dataset-limits-join");

  it("refuses the table of a batch whose where takes more memory than a read now may, naming the where", async () => {
    // A where whose one call builds a 60 MB value: within 512 MB, past 256.
    const where = "length(repeat(lang, 30000000)) > 0";
    const first = await testbed.start({ DATASET_READ_MEMORY_MB: "512" });
    const input = (await uploadText(first.baseUrl, ONE_ROW, { filename: "one.csv" })).id;
    const created = await createFromDataset(first.baseUrl, input, { prompt: "{{review_text}}", where, params: { max_tokens: 2 } });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    expect(await pollBatch(first.baseUrl, created.body.id, isFinal, { timeoutMs: 60_000 })).toMatchObject({ status: "completed" });
    expect((await fetch(`${first.baseUrl}/v1/batches/${created.body.id}/table?format=jsonl`)).status).toBe(200);
    first.child.kill("SIGTERM");
    await first.exited;

    const second = await testbed.start({ DATASET_READ_MEMORY_MB: "256" });
    const r = await fetch(`${second.baseUrl}/v1/batches/${created.body.id}/table?format=jsonl`);
    expect(r.status).toBe(400);
    const error = ((await r.json()) as any).error;
    expect(error).toMatchObject({ code: "invalid_dataset", param: "job.where" });
    expect(error.message).toMatch(
      /^where: it needed more memory or scratch disk than one dataset read may take here \(DATASET_READ_MEMORY_MB=256, /,
    );
  });
});

describe.skipIf(!linux)("a create whose client has gone", () => {
  const testbed = serverTestbed("dataset-client-gone");

  it("stops its read and records no batch: a create either answers or creates nothing", async () => {
    const server = await testbed.start({ DATASET_STEP_SECONDS: "600", DATASET_READS: "1" });
    const base = server.baseUrl;
    const input = (await uploadText(base, ONE_ROW, { filename: "one.csv" })).id;
    // A where of a minute's work, which DuckDB cannot interrupt, true for the row: finished, it would make a batch.
    const where = "levenshtein(repeat(review_text, 40000), repeat(lang, 40000)) >= 0";
    const client = new AbortController();
    const create = createFromDataset(base, input, { prompt: "{{review_text}}", where }, client.signal);
    await expect.poll(() => readProcessesOf(server.child.pid!).length, { timeout: 30_000 }).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 1_000));
    client.abort();
    await expect(create).rejects.toThrow();
    // DATASET_READS=1: the next create waits for the room the gone one held, which it gives back once stopped.
    const ok = await createFromDataset(base, input, { prompt: "{{review_text}}", params: { max_tokens: 2 } });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    const batches = (await (await fetch(`${base}/v1/batches`)).json()) as { data: Array<{ id: string }> };
    expect(batches.data.map((b) => b.id)).toEqual([ok.body.id]);
    expect(server.output()).not.toMatch(/"bound":"time"/);
    server.child.kill("SIGTERM");
    await server.exited;
  });

  it("records no batch for a create its connection's idle timeout ended unanswered", async () => {
    const server = await testbed.start({ DATASET_STEP_SECONDS: "600", DATASET_READS: "1", HTTP_IDLE_TIMEOUT_SECONDS: "5" });
    const base = server.baseUrl;
    const input = (await uploadText(base, ONE_ROW, { filename: "one.csv" })).id;
    // The batch folder is the test before's: its batch is there already.
    const ids = async () => ((await (await fetch(`${base}/v1/batches`)).json()) as { data: Array<{ id: string }> }).data.map((b) => b.id);
    const before = await ids();
    const where = "levenshtein(repeat(review_text, 40000), repeat(lang, 40000)) >= 0";
    // The server closes the connection of a create that has said nothing for 5 s (long enough for the next create
    // on a busy machine, far shorter than this where): the client is never answered.
    await expect(createFromDataset(base, input, { prompt: "{{review_text}}", where })).rejects.toThrow();
    const ok = await createFromDataset(base, input, { prompt: "{{review_text}}", params: { max_tokens: 2 } });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect((await ids()).filter((id) => !before.includes(id))).toEqual([ok.body.id]);
  });
});
