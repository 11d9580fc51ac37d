import { describe, expect, it } from "vitest";
import {
  DEMO_MODEL_NAME,
  ModelRegistry,
  ModelsFileError,
  parseModelsFile,
  promptsOverLimit,
  singleModelRegistry,
} from "../../backends/registry.js";

const FILE = `
models:
  - name: stories
    aliases: [Qwen/Qwen2.5-0.5B-Instruct]
    local: { path: ./stories260K.gguf, context_size: 1024 }
  - name: remote-small
    upstream: { base_urls: ["http://10.0.0.5:8080/v1/"], model: small, api_key_env: UPSTREAM_KEY, max_in_flight: 64 }
`;

describe("parseModelsFile", () => {
  it("reads a models file: names, aliases, a local path relative to the file, upstream limits", () => {
    const r = parseModelsFile(FILE, "/etc/obi/models.yaml", { UPSTREAM_KEY: "k" });
    expect(r.models.map((m) => m.name)).toEqual(["stories", "remote-small"]);
    expect(r.resolve("Qwen/Qwen2.5-0.5B-Instruct")?.name).toBe("stories");
    expect(r.resolve("stories")?.backend).toEqual({
      kind: "local",
      path: "/etc/obi/stories260K.gguf",
      contextSize: 1024,
      sequences: undefined,
      contexts: undefined,
      threads: undefined,
      gpuLayers: undefined,
    });
    expect(r.resolve("remote-small")?.backend).toEqual({
      kind: "upstream",
      baseUrls: ["http://10.0.0.5:8080/v1"],
      model: "small",
      apiKeyEnv: "UPSTREAM_KEY",
      minInFlight: 1,
      maxInFlight: 64,
      timeoutSeconds: 600,
      maxAttempts: 5,
      prefixRouting: "auto",
    });
    // Without default_model an unknown name is not served.
    expect(r.resolve("gpt-4o")).toBeUndefined();
    expect(r.resolve(undefined)).toBeUndefined();
    expect(r.names).toEqual(["stories", "Qwen/Qwen2.5-0.5B-Instruct", "remote-small"]);
  });

  it("routes unknown names to default_model when the file names one", () => {
    const r = parseModelsFile(`default_model: stories\n${FILE}`, "m.yaml", { UPSTREAM_KEY: "k" });
    expect(r.resolve("anything")?.name).toBe("stories");
    expect(r.resolve("remote-small")?.name).toBe("remote-small");
  });

  it.each([
    ["not YAML", "models: [", /not valid YAML/],
    ["no models", "models: []", /models: Too small/i],
    [
      "both backends",
      "models: [{ name: a, local: { path: a.gguf }, upstream: { base_urls: ['http://x/v1'], model: m } }]",
      /exactly one of local and upstream/,
    ],
    ["neither backend", "models: [{ name: a }]", /exactly one of local and upstream/],
    [
      "an unknown field",
      "models: [{ name: a, local: { path: a.gguf, gpu: 1 } }]",
      /models\.0\.local: unknown key 'gpu' \(valid keys: path, /,
    ],
    [
      "a misspelt field, named with the one meant",
      "models: [{ name: a, local: { path: a.gguf, contxt_size: 512 }, price: { spot_per_hour: 1, dedicated_per_hours: 2 } }]",
      /models\.0\.local: unknown key 'contxt_size' \(did you mean 'context_size'\?\); models\.0\.price: unknown key 'dedicated_per_hours' \(did you mean 'dedicated_per_hour'\?\)/,
    ],
    ["a misspelt top-level key", "model: [{ name: a, local: { path: a.gguf } }]", /unknown key 'model' \(did you mean 'models'\?\)/],
    ["a URL that is not http", "models: [{ name: a, upstream: { base_urls: ['ftp://x/v1'], model: m } }]", /base_urls\.0/],
    [
      "an unset key variable",
      "models: [{ name: a, upstream: { base_urls: ['http://x/v1'], model: m, api_key_env: NOPE_KEY } }]",
      /NOPE_KEY, which is not set/,
    ],
    [
      "min above max",
      "models: [{ name: a, upstream: { base_urls: ['http://x/v1'], model: m, min_in_flight: 9, max_in_flight: 4 } }]",
      /min_in_flight 9 is above max_in_flight 4/,
    ],
    [
      "a name given twice",
      "models: [{ name: a, local: { path: a.gguf } }, { name: b, aliases: [a], local: { path: b.gguf } }]",
      /'a' is given to two models/,
    ],
    [
      "a default that is not a model",
      "default_model: z\nmodels: [{ name: a, local: { path: a.gguf } }]",
      /default_model 'z' is not a model/,
    ],
  ])("refuses %s with one message naming the file and the field", (_what, text, message) => {
    expect(() => parseModelsFile(text, "models.yaml", {})).toThrow(ModelsFileError);
    expect(() => parseModelsFile(text, "models.yaml", {})).toThrow(message);
    expect(() => parseModelsFile(text, "models.yaml", {})).toThrow(/^models\.yaml: /);
  });
});

describe("singleModelRegistry", () => {
  it("names the model after its file, answers to the curl demo's name and to any other", () => {
    const r = singleModelRegistry("/models/stories260K.gguf", false);
    expect(r.models.map((m) => [m.name, m.aliases])).toEqual([["stories260K", [DEMO_MODEL_NAME]]]);
    expect(r.resolve(DEMO_MODEL_NAME)?.name).toBe("stories260K");
    expect(r.resolve("whatever")?.name).toBe("stories260K");
    expect(r.resolve(undefined)?.name).toBe("stories260K");
  });

  it("takes the generated model by preset instead of a path, and refuses both, neither, or an unknown preset", () => {
    const one = (local: string) => `models:\n  - name: m\n    local: ${local}\n`;
    const r = parseModelsFile(one("{ generated: small }"), "/etc/obi/models.yaml", {});
    const m = r.resolve("m")!;
    expect(m.generated).toBe(true);
    expect(m.backend).toMatchObject({ kind: "local", generatedPreset: "small" });
    expect((m.backend as any).path).toMatch(/offline-batch-models\/small-seed1-[0-9a-f]{12}\.gguf$/);
    expect(() => parseModelsFile(one("{ generated: small, path: x.gguf }"), "f.yaml", {})).toThrow(
      /local needs exactly one of path and generated/,
    );
    expect(() => parseModelsFile(one("{ context_size: 512 }"), "f.yaml", {})).toThrow(/local needs exactly one of path and generated/);
    expect(() => parseModelsFile(one("{ generated: huge }"), "f.yaml", {})).toThrow(/generated: must be one of/);
  });

  it("a registry refuses a fallback it does not hold", () => {
    expect(() => new ModelRegistry([], "x")).toThrow(/default_model 'x'/);
  });
});

describe("examples/models.yaml", () => {
  it("parses, and names the models docs/models.md shows", async () => {
    const { readFileSync } = await import("node:fs");
    const { repoRoot } = await import("../../testkit/repo-root.js");
    const file = `${repoRoot}/examples/models.yaml`;
    const r = parseModelsFile(readFileSync(file, "utf8"), file, {});
    expect(r.models.map((m) => m.name)).toEqual(["local-small", "remote-small"]);
    expect(r.resolve("Qwen/Qwen2.5-0.5B-Instruct")?.name).toBe("local-small");
  });
});

describe("promptsOverLimit", () => {
  const file = `
models:
  - name: short
    local: { path: a.gguf }
  - name: long
    local: { path: b.gguf, context_size: 262144 }
  - name: remote
    upstream: { base_urls: ["http://127.0.0.1:1/v1"], model: r }
`;
  const registry = parseModelsFile(file, "/tmp/models.yaml", {});

  it("names the local models whose full-context prompt may not fit in MAX_LINE_BYTES", () => {
    expect(promptsOverLimit(registry, 1024, 1024 * 1024)).toEqual([{ model: "long", contextTokens: 262144, promptBytes: 2 * 1024 * 1024 }]);
    expect(promptsOverLimit(registry, 1024, 4 * 1024 * 1024)).toEqual([]);
    expect(promptsOverLimit(registry, 200_000, 1024 * 1024).map((o) => o.model)).toEqual(["short", "long"]);
  });
});
