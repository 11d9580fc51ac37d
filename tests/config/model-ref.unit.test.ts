// What MODEL_PATH, a models file's path and --model accept: a file, hf:<owner>/<repo>[:<quant>] or an http(s) URL of
// a .gguf; everything else refused in one line; and the file each download is kept under.

import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ConfigError, checkPaths, loadConfig } from "../../config/config.js";
import { describeModelRef, isRemoteModel, modelFileName, modelRefName, parseModelRef } from "../../config/model-ref.js";

describe("model references", () => {
  it("reads a Hugging Face repository with and without a quantization, and a file in one", () => {
    expect(parseModelRef("hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:q8_0")).toEqual({
      kind: "hf",
      uri: "hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q8_0",
      owner: "Qwen",
      repo: "Qwen2.5-0.5B-Instruct-GGUF",
      quant: "Q8_0",
    });
    expect(parseModelRef("hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF")).toEqual({
      kind: "hf",
      uri: "hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF",
      owner: "Qwen",
      repo: "Qwen2.5-0.5B-Instruct-GGUF",
    });
    expect(parseModelRef("hf:a/b/sub/model-q4.gguf")).toMatchObject({ kind: "hf", file: "sub/model-q4.gguf", repo: "b" });
    expect(parseModelRef("https://example.com/m/x.gguf?download=true")).toEqual({
      kind: "url",
      url: "https://example.com/m/x.gguf?download=true",
    });
    expect(parseModelRef("./models/x.gguf")).toEqual({ kind: "file", path: "./models/x.gguf" });
    expect(isRemoteModel("HF:a/b")).toBe(true);
    expect(isRemoteModel("/models/hf:a.gguf")).toBe(false);
  });

  it.each([
    ["hf:Qwen", /needs an owner and a repository/],
    ["hf:/", /needs an owner and a repository/],
    ["hf:a b/c", /owner 'a b'/],
    ["hf:a/b:Q4:extra", /not a quantization/],
    ["hf:a/b/../../etc/passwd.gguf", /not the path of a \.gguf file/],
    ["hf:a/b/readme.md", /not the path of a \.gguf file/],
    ["https://example.com/model.bin", /must end in \.gguf/],
    ["https://user:secret@example.com/x.gguf", /user name or password/],
    ["ftp://example.com/x.gguf", /ftp:\/\/ is not supported/],
    ["s3://bucket/x.gguf", /s3:\/\/ is not supported/],
  ])("refuses %s in one line", (text, why) => {
    let message = "";
    try {
      parseModelRef(text);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(why);
    expect(message).not.toContain("\n");
  });

  it("keeps each download under a readable name of its own, the same for the same reference", () => {
    const a = parseModelRef("hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q8_0") as Exclude<ReturnType<typeof parseModelRef>, { kind: "file" }>;
    const b = parseModelRef("hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:q8_0") as typeof a;
    const c = parseModelRef("hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M") as typeof a;
    expect(modelFileName(a)).toMatch(/^Qwen_Qwen2\.5-0\.5B-Instruct-GGUF\.Q8_0-[0-9a-f]{10}\.gguf$/);
    expect(modelFileName(b)).toBe(modelFileName(a));
    expect(modelFileName(c)).not.toBe(modelFileName(a));
    const u1 = parseModelRef("https://x.example/a/model.gguf") as typeof a;
    const u2 = parseModelRef("https://x.example/b/model.gguf") as typeof a;
    expect(modelFileName(u1)).toMatch(/^model-[0-9a-f]{10}\.gguf$/);
    expect(modelFileName(u2)).not.toBe(modelFileName(u1));
    // A name made to climb out of the folder stays a plain file name.
    const evil = parseModelRef("https://x.example/%2e%2e%2F..%2Fetc.gguf") as typeof a;
    expect(modelFileName(evil)).not.toMatch(/[/\\]/);
    expect(modelFileName(evil).startsWith(".")).toBe(false);
    expect(modelRefName(a)).toBe("Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q8_0");
    expect(modelRefName(u1)).toBe("model");
  });

  it("names a URL in logs without its query string, which may carry a token", () => {
    expect(describeModelRef(parseModelRef("https://x.example/m.gguf?token=secret"))).toBe("https://x.example/m.gguf");
  });
});

describe("MODEL_PATH and MODELS_DIR in the configuration", () => {
  it("keeps a download's reference as written, makes a file and MODELS_DIR absolute", () => {
    const remote = loadConfig({ MODEL_PATH: "hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q8_0", MODELS_DIR: "my-models" });
    expect(remote.modelPath).toBe("hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q8_0");
    expect(remote.modelsDir).toBe(`${process.cwd()}/my-models`);
    expect(loadConfig({ MODEL_PATH: "m.gguf" }).modelPath).toBe(`${process.cwd()}/m.gguf`);
    expect(loadConfig({}).modelsDir).toBe(`${process.cwd()}/models`);
  });

  it("refuses a reference it cannot download at start, in one line naming MODEL_PATH", () => {
    expect(() => loadConfig({ MODEL_PATH: "hf:Qwen" })).toThrow(ConfigError);
    expect(() => loadConfig({ MODEL_PATH: "hf:Qwen" })).toThrow(/^invalid configuration: MODEL_PATH=hf:Qwen: not a Hugging Face reference/);
    expect(() => loadConfig({ MODEL_PATH: "ftp://h/x.gguf" })).toThrow(/MODEL_PATH=ftp:\/\/h\/x\.gguf: ftp:\/\/ is not supported/);
    expect(() => loadConfig({ HF_ENDPOINT: "not a url" })).toThrow(/HF_ENDPOINT=not a url: must be an http\(s\) URL/);
  });

  it("names hf: for a Hugging Face repository given as a path, and a MODELS_DIR that is a file", async () => {
    const config = loadConfig({ MODEL_PATH: "Qwen/Qwen2.5-0.5B-Instruct-GGUF" });
    expect(() => checkPaths(config)).toThrow(
      `MODEL_PATH=${process.cwd()}/Qwen/Qwen2.5-0.5B-Instruct-GGUF: no such file; it must be a .gguf file (for the Hugging Face repository, write hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF)`,
    );
    expect(() => checkPaths(loadConfig({ MODEL_PATH: "/nowhere/m.gguf" }))).toThrow(/no such file; it must be a \.gguf file$/);
    const file = fileURLToPath(import.meta.url);
    expect(() => checkPaths(loadConfig({ MODELS_DIR: file }))).toThrow(
      `MODELS_DIR=${file}: is a file; it must be a folder (or not exist yet)`,
    );
    // A download's reference is not a path to check.
    expect(() => checkPaths(loadConfig({ MODEL_PATH: "hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q8_0" }))).not.toThrow();
  });
});
