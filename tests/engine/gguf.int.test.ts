// The generated models load and run in the real node-llama-cpp: tokenizer, generation, chat
// template, embeddings, and the Q8_0 path.
import { mkdtemp, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {
  type ControlledEvaluateInputItem,
  getLlama,
  JinjaTemplateChatWrapper,
  type Llama,
  LlamaChatSession,
  LlamaLogLevel,
  type LlamaModel,
  readGgufFileInfo,
  resolveChatWrapper,
  type Token,
} from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MODEL_PRESETS } from "../../engine/gguf/presets.js";
import { CHATML_TEMPLATE, SPECIAL_TOKENS } from "../../engine/gguf/tokenizer.js";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";

const tiny = MODEL_PRESETS.tiny;
let dir: string;
let llama: Llama;
let model: LlamaModel;
let modelPath: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "gguf-model-test-"));
  const started = performance.now();
  modelPath = await ensureGeneratedModel({ dir });
  const { size } = await stat(modelPath);
  console.log(`generated tiny: ${size} bytes in ${(performance.now() - started).toFixed(0)} ms`);
  llama = await getLlama({ build: "never", gpu: false, logLevel: LlamaLogLevel.error });
  model = await llama.loadModel({ modelPath });
});
afterAll(async () => {
  await model?.dispose();
  await llama?.dispose();
  await rm(dir, { recursive: true, force: true });
});

/** Greedy decoding of `count` tokens after `prompt`, on a fresh single-thread context. */
async function greedy(m: LlamaModel, prompt: string, count: number): Promise<Token[]> {
  const context = await m.createContext({ contextSize: 256, threads: 1 });
  try {
    const out: Token[] = [];
    for await (const token of context.getSequence().evaluate(m.tokenize(prompt), { temperature: 0 })) {
      out.push(token);
      if (out.length === count) break;
    }
    return out;
  } finally {
    await context.dispose();
  }
}

describe("generated tiny model", () => {
  it("declares the preset's shape and the ChatML template", async () => {
    const info = await readGgufFileInfo(modelPath, { logWarnings: false });
    expect(info.metadata.general.architecture).toBe("llama");
    expect(info.metadata.tokenizer.chat_template).toBe(CHATML_TEMPLATE);
    expect(model.fileInfo.metadata.tokenizer.chat_template).toBe(CHATML_TEMPLATE);
    expect(info.architectureMetadata).toMatchObject({
      block_count: tiny.blockCount,
      embedding_length: tiny.embeddingLength,
      feed_forward_length: tiny.feedForwardLength,
      context_length: tiny.contextLength,
      attention: { head_count: tiny.headCount, head_count_kv: tiny.headCountKv },
    });
    expect(info.tensorInfo!.find((t) => t.name === "blk.0.attn_k.weight")!.dimensions.map(Number)).toEqual([64, 32]);
    expect(model.trainContextSize).toBe(tiny.contextLength);
    expect(model.embeddingVectorSize).toBe(tiny.embeddingLength);
  });

  it("tokenizes any text and detokenizes it back exactly", () => {
    for (const text of ["Hello, wörld! 2+2", "  two  spaces\n\ttab ✓ 日本語 🙂", "the quick brown fox"]) {
      const tokens = model.tokenize(text);
      expect(model.detokenize(tokens)).toBe(text);
    }
    // Words merge: plain English takes fewer tokens than bytes.
    expect(model.tokenize("the quick brown fox jumps over the lazy dog").length).toBeLessThan(25);
  });

  it("parses ChatML control tokens as single tokens only when asked", () => {
    const text = "<|im_start|>user\nhi<|im_end|>";
    const special = model.tokenize(text, true);
    expect(special[0]).toBe(SPECIAL_TOKENS.imStart.id);
    expect(special.at(-1)).toBe(SPECIAL_TOKENS.imEnd.id);
    expect(model.tokenize(text, false)).not.toContain(SPECIAL_TOKENS.imStart.id);
    expect(model.tokens.eos).toBe(SPECIAL_TOKENS.imEnd.id);
    expect(model.isEogToken(SPECIAL_TOKENS.endOfText.id as Token)).toBe(true);
  });

  it("generates 16 tokens greedily, deterministically, with finite logits", async () => {
    const first = await greedy(model, "Once upon a time", 16);
    expect(first).toHaveLength(16);
    expect(first.every((t) => t >= 0 && t < tiny.vocabSize)).toBe(true);
    expect(typeof model.detokenize(first)).toBe("string");
    expect(await greedy(model, "Once upon a time", 16)).toEqual(first);

    const context = await model.createContext({ contextSize: 256, threads: 1 });
    try {
      const prompt = model.tokenize("Once upon a time");
      const inputs: ControlledEvaluateInputItem[] = [...prompt.slice(0, -1), [prompt.at(-1)!, { generateNext: { logits: true } }]];
      const results = await context.getSequence().controlledEvaluate(inputs);
      const logits = [...results.at(-1)!.next.logits!.values()];
      expect(logits).toHaveLength(tiny.vocabSize);
      expect(logits.every(Number.isFinite)).toBe(true);
      expect(Math.max(...logits)).toBeGreaterThan(Math.min(...logits));
    } finally {
      await context.dispose();
    }
  });

  it("resolves to its own template, with that template's tool-call syntax, and answers a chat prompt", async () => {
    const wrapper = resolveChatWrapper({
      fileInfo: model.fileInfo,
      filename: model.filename,
      bosString: model.tokens.bosString,
      tokenizer: model.tokenizer,
    });
    expect(wrapper?.wrapperName).toBe("JinjaTemplate");
    expect(wrapper instanceof JinjaTemplateChatWrapper && wrapper.usingJinjaFunctionCallTemplate).toBe(true);

    const context = await model.createContext({ contextSize: 256, threads: 1 });
    try {
      const session = new LlamaChatSession({ contextSequence: context.getSequence() });
      expect(session.chatWrapper.wrapperName).toBe("JinjaTemplate");
      const answer = await session.prompt("Hi there", { maxTokens: 8, temperature: 0 });
      expect(typeof answer).toBe("string");
    } finally {
      await context.dispose();
    }
  });

  it("produces finite embeddings of the model's width", async () => {
    const embedding = await model.createEmbeddingContext({ contextSize: 128, threads: 1 });
    try {
      const { vector } = await embedding.getEmbeddingFor("hello world");
      expect(vector).toHaveLength(tiny.embeddingLength);
      expect(vector.every(Number.isFinite)).toBe(true);
      expect(vector.some((x) => x !== 0)).toBe(true);
    } finally {
      await embedding.dispose();
    }
  });
});

describe("generated Q8_0 model (small preset)", () => {
  it("loads and generates", async () => {
    const small = await ensureGeneratedModel({ dir, preset: "small" });
    const info = await readGgufFileInfo(small, { logWarnings: false });
    expect(info.metadata.general.file_type).toBe(7); // MOSTLY_Q8_0
    const q8 = await llama.loadModel({ modelPath: small });
    try {
      expect(q8.embeddingVectorSize).toBe(MODEL_PRESETS.small.embeddingLength);
      const tokens = await greedy(q8, "Hello", 4);
      expect(tokens).toHaveLength(4);
      expect(tokens.every((t) => t >= 0 && t < MODEL_PRESETS.small.vocabSize)).toBe(true);
    } finally {
      await q8.dispose();
    }
  });
});
