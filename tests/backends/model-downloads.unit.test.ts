// A models file whose local paths name downloads (hf:..., a URL): kept as references when the file is read, each
// fetched into MODELS_DIR when the registry is loaded (nothing fetched where no model runs), a bad one refused
// naming the model.
import { readFile } from "node:fs/promises";
import path from "node:path";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadRegistry } from "../../backends/build.js";
import { parseModelsFile } from "../../backends/registry.js";
import { loadConfig } from "../../config/config.js";
import { writeGeneratedModel } from "../../engine/load/generated-model.js";
import { closedPort, type ModelHost, startModelHost } from "../helpers/model-host.js";
import { scratchDir } from "../helpers/scratch.js";

const scratch = scratchDir("model-downloads");
let host: ModelHost;
const quiet = pino({ level: "silent" });

beforeAll(async () => {
  const file = await scratch.file("tiny.gguf");
  await writeGeneratedModel(file, { preset: "tiny" });
  host = await startModelHost();
  host.put("/Owner/Tiny-GGUF/resolve/main/tiny-q8_0.gguf", await readFile(file));
  host.manifest("Owner", "Tiny-GGUF", "Q8_0", "tiny-q8_0.gguf");
});
afterAll(() => host.close());

const modelsFile = async (localPath: string) =>
  scratch.write(
    `models:\n  - name: tiny\n    local: { path: "${localPath}" }\n  - name: also\n    local: { path: ./rel.gguf }\n`,
    "models.yaml",
  );

describe("a models file naming downloads", () => {
  it("keeps an hf: path as written (a file path stays relative to the models file)", () => {
    const r = parseModelsFile(
      `models:\n  - name: q\n    local: { path: "hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:q8_0" }\n  - name: f\n    local: { path: m.gguf }\n`,
      "/etc/obi/models.yaml",
      {},
    );
    expect(r.get("q")?.backend).toMatchObject({ kind: "local", path: "hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:q8_0" });
    expect(r.get("f")?.backend).toMatchObject({ path: "/etc/obi/m.gguf" });
  });

  it("refuses a reference it cannot download, naming the model", () => {
    expect(() => parseModelsFile(`models:\n  - name: q\n    local: { path: "hf:Qwen" }\n`, "/m.yaml", {})).toThrow(
      /^\/m\.yaml: model 'q': local\.path: not a Hugging Face reference/,
    );
  });

  it("fetches each download into MODELS_DIR when the registry loads, and none where no model runs (an API server)", async () => {
    const modelsDir = path.dirname(await scratch.file("models/x"));
    const config = loadConfig({ MODELS_FILE: await modelsFile("hf:Owner/Tiny-GGUF:Q8_0"), MODELS_DIR: modelsDir, HF_ENDPOINT: host.url });
    const api = await loadRegistry(config, quiet, { fetch: false });
    expect(api.get("tiny")?.backend).toMatchObject({ path: "hf:Owner/Tiny-GGUF:Q8_0" });
    expect(host.requests).toEqual([]);
    const seen: string[] = [];
    // "present" fetches nothing: a reference not downloaded yet stays one.
    expect((await loadRegistry(config, quiet, { fetch: "present" })).get("tiny")?.backend).toMatchObject({
      path: "hf:Owner/Tiny-GGUF:Q8_0",
    });
    expect(host.requests).toEqual([]);
    const registry = await loadRegistry(config, quiet, { onDownload: (s) => seen.push(s.state) });
    const local = registry.get("tiny")?.backend as { path: string };
    expect(path.dirname(local.path)).toBe(modelsDir);
    expect(seen.at(-1)).toBe("done");
    // Once downloaded, "present" finds it where the download put it, still asking the host nothing.
    const asked = host.requests.length;
    expect((await loadRegistry(config, quiet, { fetch: "present" })).get("tiny")?.backend).toMatchObject({ path: local.path });
    expect(host.requests).toHaveLength(asked);
  });

  it("stops with one line naming the model when its download's host cannot be reached", async () => {
    const config = loadConfig({
      MODELS_FILE: await modelsFile("hf:Owner/Other-GGUF:Q8_0"),
      MODELS_DIR: path.dirname(await scratch.file("models2/x")),
      HF_ENDPOINT: `http://127.0.0.1:${await closedPort()}`,
    });
    await expect(loadRegistry(config, quiet)).rejects.toThrow(
      /^hf:Owner\/Other-GGUF:Q8_0: cannot reach 127\.0\.0\.1:\d+ \(ECONNREFUSED\); .* set the path of model 'tiny' in MODELS_FILE to the local file$/,
    );
  });
});
