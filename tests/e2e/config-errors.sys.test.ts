// Configuration mistakes on the real server process: one line naming the setting as the user set it, its
// value and what is allowed, exit 1, before the model loads.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { testModelPath } from "../../testkit/model.js";
import { spawnMain } from "../helpers/process.js";

const dir = mkdtempSync(path.join(os.tmpdir(), "obi-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function failure(env: Record<string, string>, args: string[] = []) {
  const p = spawnMain({ HOST: "127.0.0.1", PORT: "0", BATCH_DIR: dir, GPU: "false", THREADS: "1", ...env }, args);
  const code = await p.exited;
  const lines = p.output().trim().split("\n");
  // The one line a failed start ends with, on stderr: the log's JSON lines (stdout) may reach the pipe after it.
  const said = lines.filter((l) => !l.startsWith("{")).at(-1);
  return { code, lines, said };
}

describe("configuration mistakes", () => {
  it.each([
    [{ THREADS: "abc" }, "invalid configuration: THREADS=abc: must be a whole number >= 0"],
    [{ SEQUENCES: "-1" }, "invalid configuration: SEQUENCES=-1: must be a whole number >= 0"],
    [{ REPRODUCIBLE: "maybe" }, "invalid configuration: REPRODUCIBLE=maybe: must be true or false (or on/off, yes/no, 1/0)"],
    [{ MODEL_PATH: "/nonexistent/model.gguf" }, "MODEL_PATH=/nonexistent/model.gguf: no such file; it must be a .gguf file"],
  ])("%j: one line naming it, exit 1", async (env, message) => {
    const { code, lines } = await failure(env);
    expect(code).toBe(1);
    expect(lines).toEqual([`offline-batch-inference: ${message}`]);
  });

  it.each([
    [
      { ROLE: "worker" },
      "invalid configuration: ROLE=worker needs DATABASE_URL: without it the service is one process that does everything",
    ],
    [{ DATABASE_URL: "mysql://db/obi" }, "invalid configuration: DATABASE_URL: must be a postgres:// or postgresql:// URL"],
  ])("%j: the distributed mode's settings, one line, exit 1", async (env, message) => {
    const { code, lines } = await failure(env);
    expect(code).toBe(1);
    expect(lines).toEqual([`offline-batch-inference: ${message}`]);
  });

  it("a database that cannot be reached: one line naming DATABASE_URL's host, never its password", async () => {
    const { code, lines, said } = await failure({
      DATABASE_URL: "postgres://obi:s3cret-pw@127.0.0.1:1/obi",
      ROLE: "api",
      LOG_LEVEL: "error",
    });
    expect(code).toBe(1);
    expect(said).toMatch(/^offline-batch-inference: failed to start: DATABASE_URL: cannot use the database 127\.0\.0\.1:1\/obi: /);
    expect(lines.join("\n")).not.toMatch(/s3cret-pw/);
  });

  it("a misspelt key in the models config file: one line naming it and the key meant, exit 1", async () => {
    const file = path.join(dir, "model_config.yaml");
    writeFileSync(file, "engine:\n  thread: 2\n");
    const { code, lines } = await failure({ MODEL_CONFIG: file });
    expect(code).toBe(1);
    expect(lines).toEqual([
      `offline-batch-inference: invalid configuration: ${file}: unknown key 'engine.thread' (did you mean 'engine.threads'?)`,
    ]);
  });

  it("a worker whose database cannot be reached: one line, before its model loads", async () => {
    const { code, lines, said } = await failure({
      DATABASE_URL: "postgres://obi:pw@127.0.0.1:1/obi",
      ROLE: "worker",
      MODEL_PATH: await testModelPath(),
    });
    expect(code).toBe(1);
    expect(said).toMatch(/^offline-batch-inference: failed to start: DATABASE_URL: cannot use the database 127\.0\.0\.1:1\/obi: /);
    // Said before the model loads (minutes for a large one), not after.
    expect(lines.join("\n")).not.toMatch(/loading model|model loaded/);
  });

  it("misspelt variables on every interface (KEY_FILE for KEYS_FILE): one line naming each and the setting meant, exit 1, never an open API", async () => {
    const keys = path.join(dir, "keys.yaml");
    writeFileSync(keys, "keys: []\n");
    const { code, lines } = await failure({
      HOST: "0.0.0.0",
      KEY_FILE: keys,
      API_KEY: "sk-x",
      MODEL_PTH: "/nonexistent/model.gguf",
      MAX_QUEUE_DEPHT: "5",
      ENGINE_THREDS: "1",
    });
    expect(code).toBe(1);
    expect(lines).toEqual([
      "offline-batch-inference: invalid configuration: KEY_FILE is not a setting (did you mean KEYS_FILE?); API_KEY is not a setting " +
        "(did you mean API_KEYS?); MODEL_PTH is not a setting (did you mean MODEL_PATH?); MAX_QUEUE_DEPHT is not a setting " +
        "(did you mean MAX_QUEUE_DEPTH?); ENGINE_THREDS is not a setting (did you mean THREADS?) " +
        "(a variable meant for another program goes in ENV_NOT_SETTINGS)",
    ]);
  });

  it("BATCH_DIR pointing at a file", async () => {
    const file = path.join(dir, "not-a-folder");
    writeFileSync(file, "x");
    const { code, lines } = await failure({ BATCH_DIR: file });
    expect(code).toBe(1);
    expect(lines).toEqual([`offline-batch-inference: BATCH_DIR=${file}: is a file; it must be a folder (or not exist yet)`]);
  });

  it("a port in use: one line saying so, no stack trace", async () => {
    const taken = net.createServer().listen(0, "127.0.0.1");
    await new Promise((r) => taken.once("listening", r));
    const port = String((taken.address() as net.AddressInfo).port);
    try {
      const { code, lines, said } = await failure({ PORT: port, MODEL_PATH: await testModelPath(), BATCH_DIR: path.join(dir, "b") });
      expect(code).toBe(1);
      expect(said).toBe(`offline-batch-inference: cannot listen on 127.0.0.1:${port}: the port is already in use; set PORT to a free one`);
      expect(lines.join("\n")).not.toMatch(/\n\s+at /);
      // Said before the model loads (minutes for a large one), not after.
      expect(lines.join("\n")).not.toMatch(/loading model|model loaded/);
    } finally {
      taken.close();
    }
  });

  it.each([
    [["--port", "9999"], "unknown argument '--port': settings are environment variables: PORT=9999 (--help lists them)"],
    [["--hlep"], "unknown argument '--hlep' (did you mean --help?)"],
  ])("a command-line argument the server does not know (%j): one line, exit 2, nothing started", async (args, message) => {
    const { code, lines } = await failure({ MODEL_PATH: await testModelPath() }, args);
    expect(code).toBe(2);
    expect(lines).toEqual([`offline-batch-inference: ${message}`]);
  });

  it("answers --help and a mistake in its settings without loading the engine", async () => {
    // A module hook that says when node-llama-cpp (a second of a core to import) is loaded.
    const hook = path.join(dir, "engine-loads.mjs");
    writeFileSync(
      hook,
      [
        'import { register } from "node:module";',
        'import { isMainThread } from "node:worker_threads";',
        "if (isMainThread) register(import.meta.url);",
        "let said = false;",
        "export async function load(url, context, next) {",
        '  if (!said && url.includes("/node_modules/node-llama-cpp/")) { said = true; process.stderr.write("ENGINE LOADED\\n"); }',
        "  return next(url, context);",
        "}",
      ].join("\n"),
    );
    const traced = { NODE_OPTIONS: `--import ${hook}` };
    const help = await failure(traced, ["--help"]);
    expect(help.code).toBe(0);
    expect(help.lines.join("\n")).toMatch(/MODEL_PATH/);
    const mistake = await failure({ ...traced, THREADS: "abc" });
    expect(mistake.said).toBe("offline-batch-inference: invalid configuration: THREADS=abc: must be a whole number >= 0");
    for (const run of [help, mistake]) expect(run.lines).not.toContain("ENGINE LOADED");
    // The hook does see it where it is loaded.
    const seen = spawnSync(process.execPath, ["--input-type=module", "-e", 'await import("node-llama-cpp")'], {
      env: { ...process.env, ...traced },
      encoding: "utf8",
    });
    expect(seen.stderr).toContain("ENGINE LOADED");
  });
});
