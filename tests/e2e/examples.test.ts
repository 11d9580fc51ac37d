// examples/openai_client.ts, the TypeScript client a user copies, run unchanged against a live server.
import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot } from "../helpers/process.js";
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
