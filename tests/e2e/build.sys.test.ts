// `npm run build` output runs as the production image runs it: node dist/app/main.js, no tsx, a dataset's reads in
// processes started from the compiled code too.
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { isFinal, pollBatch, uploadText } from "../../testkit/batch-client.js";
import { testModelPath } from "../../testkit/model.js";
import { repoRoot } from "../../testkit/repo-root.js";
import { createFromDataset } from "../helpers/dataset-batches.js";

const run = promisify(execFile);
// Inside the repository, so the compiled code resolves node_modules as dist/ does.
const out = path.join(repoRoot, ".tmp", `build-test-${process.pid}`);
afterAll(() => rmSync(out, { recursive: true, force: true }));

/** A dataset made into a batch and its table served: both reads run in a process started from the compiled entry. */
async function datasetRoundTrip(base: string): Promise<void> {
  const input = (await uploadText(base, "id,t\n1,Once\n2,Twice\n", { filename: "rows.csv" })).id;
  const { status, body: created } = await createFromDataset(base, input, { prompt: "{{t}}", where: "id > 1", params: { max_tokens: 2 } });
  expect(status, JSON.stringify(created)).toBe(200);
  expect(await pollBatch(base, created.id, isFinal, { timeoutMs: 60_000 })).toMatchObject({ status: "completed" });
  const table = await (await fetch(`${base}/v1/batches/${created.id}/table?format=jsonl`)).text();
  expect(
    table
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l).t),
  ).toEqual(["Twice"]);
}

describe("the compiled build", () => {
  it("serves the API from plain JavaScript and finds its config, page, package info and a dataset read's entry", async () => {
    mkdirSync(out, { recursive: true });
    const dist = path.join(out, "dist");
    await run(
      process.execPath,
      // Without type checking, which `npm run lint` does: the JavaScript emitted is the same, for 8 CPU-s rather than 19.
      [
        path.join(repoRoot, "node_modules/typescript/bin/tsc"),
        "-p",
        "tsconfig.build.json",
        "--outDir",
        dist,
        "--noCheck",
        "--sourceMap",
        "false",
      ],
      { cwd: repoRoot },
    );
    await run(process.execPath, ["scripts/copy-build-assets.mjs", dist], { cwd: repoRoot });
    await run(process.execPath, ["scripts/bundle-entries.mjs", dist], { cwd: repoRoot });

    // The distributed mode's schema travels with the build, and a dataset read's process its entry.
    expect(existsSync(path.join(dist, "dataset-jobs/read-child.js"))).toBe(true);
    expect(existsSync(path.join(dist, "postgres/migrations/001_initial.sql"))).toBe(true);
    // The entry points are bundles, node-llama-cpp inside them: none of the build imports it from node_modules.
    const built = readdirSync(dist, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".js"));
    expect(readFileSync(path.join(dist, "app/main.js"), "utf8")).toMatch(/from "\.\.\/chunks\//);
    const fromPackage = built.filter(
      (f) => f.startsWith("chunks/") && /from "node-llama-cpp"/.test(readFileSync(path.join(dist, f), "utf8")),
    );
    expect(fromPackage).toEqual([]);
    const help = await run(process.execPath, [path.join(dist, "runner/main.js"), "--help"]);
    expect(help.stdout).toMatch(/--input-file/);

    const { spawn } = await import("node:child_process");
    const child = spawn(process.execPath, [path.join(dist, "app/main.js")], {
      // Another directory as cwd: nothing may depend on being started from the repository root.
      cwd: out,
      env: {
        ...process.env,
        HOST: "127.0.0.1",
        PORT: "0",
        BATCH_DIR: path.join(out, "data"),
        MODEL_PATH: await testModelPath(),
        THREADS: "1",
        NODE_ENV: "production",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let log = "";
    child.stdout.on("data", (d) => (log += d));
    child.stderr.on("data", (d) => (log += d));
    const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
    try {
      let port: string | undefined;
      for (let i = 0; i < 300 && !port; i++) {
        port = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(log)?.[1];
        if (child.exitCode !== null) throw new Error(`server exited:\n${log}`);
        if (!port) await new Promise((r) => setTimeout(r, 100));
      }
      expect(port, log).toBeDefined();
      const base = `http://127.0.0.1:${port}`;
      expect(await (await fetch(`${base}/`)).json()).toMatchObject({ status: "ok", service: "offline-batch-inference" });
      expect(await (await fetch(`${base}/`, { headers: { accept: "text/html" } })).text()).toMatch(/<title>/);
      expect((await fetch(`${base}/ready`)).status).toBe(200);
      expect(await (await fetch(`${base}/metrics`)).text()).toMatch(/obi_queue_depth\{scope="cluster"\} 0/);
      await datasetRoundTrip(base);
    } finally {
      child.kill("SIGTERM");
    }
    expect(await exited).toBe(0);
  }, 180_000);
});
