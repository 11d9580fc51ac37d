// examples/openai_client.ts, the TypeScript client a user copies, run unchanged against a live server.
import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot } from "../../testkit/repo-root.js";
import { completionJsonl } from "../../testkit/workload.js";
import { createBatch, isFinal, pollBatch, uploadJsonl } from "../helpers/http-batches.js";
import { startTestService, type TestService } from "../helpers/service.js";

const run = promisify(execFile);
let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => svc?.close());

describe("examples/openai_client.ts", () => {
  it("uploads the sample batch, polls it to completion and prints every result", async () => {
    const { stdout } = await run(process.execPath, ["--import", "tsx", path.join(repoRoot, "examples/openai_client.ts")], {
      cwd: repoRoot,
      env: { ...process.env, BASE_URL: svc.baseUrl },
    });
    expect(stdout).toMatch(/uploaded sample_batch\.jsonl as file-\S+ \(\d+ bytes\)/);
    expect(stdout).toMatch(/created batch_\S+/);
    expect(stdout).toMatch(/completed: 4\/4 done, 0 failed/);
    for (const id of ["request-1", "request-2", "request-3", "request-4"]) expect(stdout).toMatch(new RegExp(`^${id}: ".+"$`, "m"));
    expect(stdout).toMatch(/1 batches on the server; this one ended completed/);
  });
});

describe("examples/models.yaml", () => {
  it("starts as shipped on a fresh clone: its local model is the generated one, and a batch runs on it", async () => {
    const shipped = await startTestService({ MODEL_PATH: "", MODELS_FILE: path.join(repoRoot, "examples/models.yaml") });
    try {
      const ready = await (await fetch(`${shipped.baseUrl}/ready`)).json();
      expect(ready.status).toBe("ready");
      expect(ready.models.map((m: any) => m.name)).toEqual(["local-small", "remote-small"]);
      const file = await uploadJsonl(shipped.baseUrl, completionJsonl(2, { prefix: "shipped", model: "Qwen/Qwen2.5-0.5B-Instruct" }));
      const batch = (await createBatch(shipped.baseUrl, file.id)).body;
      const done = await pollBatch(shipped.baseUrl, batch.id, isFinal);
      expect(done.status).toBe("completed");
      expect(done.model).toBe("local-small");
      expect(done.request_counts).toMatchObject({ total: 2, completed: 2, failed: 0 });
    } finally {
      await shipped.close();
    }
  }, 120_000);
});
