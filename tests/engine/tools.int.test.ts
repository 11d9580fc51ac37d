// Function calling on the local engine, in the chat template's own syntax: the generated model's template is
// ChatML with Hermes-style <tool_call> blocks (engine/gguf/tokenizer.ts), stories260K has no template at all.
import { Ajv } from "ajv";
import { getLlama, type LlamaModel } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LlamaBackend } from "../../engine/adapter/openai-backend.js";
import { chooseChatFormat, renderChat } from "../../engine/generate/chat.js";
import { generateWithTools, type Phase } from "../../engine/generate/tool-calls.js";
import { createEngine } from "../../engine/index.js";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";
import type { Engine, GenerationResult } from "../../engine/types.js";
import { parseRequest } from "../../openai/parse.js";
import { openGeneratedEngine, sharedModel } from "../../testkit/model.js";

const weather = {
  type: "object",
  properties: { city: { type: "string", enum: ["Paris", "Rome", "Oslo"] }, metric: { type: "boolean" } },
  required: ["city", "metric"],
  additionalProperties: false,
};
const tools = [
  { type: "function", function: { name: "get_weather", description: "Today's weather in a city", parameters: weather, strict: true } },
  { type: "function", function: { name: "get_time", parameters: { type: "object", properties: {}, additionalProperties: false } } },
];
const ask = [{ role: "user", content: "What is the weather in Paris?" }];
const validWeather = new Ajv().compile(weather);

let engine: Engine;
let backend: LlamaBackend;
beforeAll(async () => {
  engine = await openGeneratedEngine();
  backend = new LlamaBackend(engine);
});
afterAll(async () => {
  await engine?.close();
});

const chat = async (body: object): Promise<any> => {
  const request = parseRequest("/v1/chat/completions", { messages: ask, tools, temperature: 0, max_completion_tokens: 200, ...body });
  backend.check(request);
  return (await backend.execute(request)).body;
};
const refusal = async (body: object) => {
  try {
    backend.check(parseRequest("/v1/chat/completions", { messages: ask, ...body }));
  } catch (err: any) {
    return { code: err.code, param: err.param, message: err.message };
  }
  throw new Error("expected a refusal");
};

describe("tools on a template with a function-calling format", () => {
  it("says so in the backend's settings", () => {
    expect(backend.info.settings.toolCalling).toBe(true);
  });

  it('tool_choice "required": the answer is tool calls, each naming a declared function with arguments that validate', async () => {
    for (const seed of [1, 2, 3, 4]) {
      const body = await chat({ tool_choice: "required", temperature: 1, seed });
      const [choice] = body.choices;
      expect(choice.finish_reason).toBe("tool_calls");
      expect(choice.message.content).toBeNull();
      expect(choice.message.tool_calls.length).toBeGreaterThanOrEqual(1);
      for (const call of choice.message.tool_calls) {
        expect(call.id).toMatch(/^call_[0-9a-f]+$/);
        expect(call.type).toBe("function");
        expect(["get_weather", "get_time"]).toContain(call.function.name);
        const args = JSON.parse(call.function.arguments);
        if (call.function.name === "get_weather") expect(validWeather(args), call.function.arguments).toBe(true);
        else expect(args).toEqual({});
      }
      expect(body.usage.completion_tokens).toBeGreaterThan(0);
    }
  });

  it("a named function is the one called, exactly once", async () => {
    const body = await chat({ tool_choice: { type: "function", function: { name: "get_weather" } } });
    const calls = body.choices[0].message.tool_calls;
    expect(calls).toHaveLength(1);
    expect(calls[0].function.name).toBe("get_weather");
    expect(validWeather(JSON.parse(calls[0].function.arguments))).toBe(true);
  });

  it("parallel_tool_calls: false allows one call per answer", async () => {
    for (const seed of [5, 6, 7]) {
      const body = await chat({ tool_choice: "required", parallel_tool_calls: false, temperature: 1, seed });
      expect(body.choices[0].message.tool_calls).toHaveLength(1);
    }
  });

  it('tool_choice "none": a text answer, with the tools still shown to the model', async () => {
    const withTools = await chat({ tool_choice: "none", max_completion_tokens: 8 });
    const without = await chat({ tools: undefined, max_completion_tokens: 8 });
    expect(withTools.choices[0].message.tool_calls).toBeUndefined();
    expect(typeof withTools.choices[0].message.content).toBe("string");
    expect(withTools.usage.prompt_tokens).toBeGreaterThan(without.usage.prompt_tokens + 50);
  });

  it('tool_choice "auto" (the default with tools): text or calls, in OpenAI\'s shape either way', async () => {
    const body = await chat({ max_completion_tokens: 16 });
    const { message, finish_reason } = body.choices[0];
    if (finish_reason === "tool_calls") expect(message.tool_calls.length).toBeGreaterThan(0);
    else expect(typeof message.content).toBe("string");
  });

  it("max_completion_tokens bounds the whole answer, calls included", async () => {
    const body = await chat({ tool_choice: "required", max_completion_tokens: 5 });
    expect(body.choices[0].finish_reason).toBe("length");
    expect(body.usage.completion_tokens).toBeLessThanOrEqual(5);
  });

  it("the generated template: node-llama-cpp's search for a built-in wrapper ends on the Jinja one the engine takes at once", async () => {
    const llama = await getLlama({ build: "never", gpu: false });
    const model = await llama.loadModel({ modelPath: await ensureGeneratedModel() });
    try {
      const taken = chooseChatFormat(model);
      const searched = chooseChatFormat(model, "auto");
      expect(taken.wrapper.wrapperName).toBe("JinjaTemplate");
      expect(searched.wrapper.wrapperName).toBe(taken.wrapper.wrapperName);
      expect(taken.tools?.trigger).toBe(searched.tools?.trigger);
      const history = [
        { role: "system" as const, content: "Be brief." },
        { role: "user" as const, content: "Weather in Paris?" },
        { role: "assistant" as const, content: "", toolCalls: [{ id: "c1", name: "get_weather", arguments: '{"city":"Paris"}' }] },
        { role: "tool" as const, content: '{"celsius": 21}', toolCallId: "c1" },
      ];
      const functions = [{ name: "get_weather", parameters: weather }];
      const render = (f: typeof taken) => renderChat(model, f, history, functions);
      expect(render(taken).tokens).toEqual(render(searched).tokens);
      expect(render(taken).stopStrings).toEqual(render(searched).stopStrings);
    } finally {
      await model.dispose();
      await llama.dispose();
    }
  });

  it("renders earlier calls and their results back in the template's syntax", async () => {
    const llama = await getLlama({ build: "never", gpu: false });
    const model = await llama.loadModel({ modelPath: await ensureGeneratedModel() });
    try {
      const format = chooseChatFormat(model);
      const history = [
        { role: "user" as const, content: "Weather in Paris?" },
        {
          role: "assistant" as const,
          content: "",
          toolCalls: [{ id: "c1", name: "get_weather", arguments: '{"city":"Paris","metric":true}' }],
        },
        { role: "tool" as const, content: '{"celsius": 21}', toolCallId: "c1" },
      ];
      const { tokens } = renderChat(model, format, history, [{ name: "get_weather", parameters: weather }]);
      const text = model.detokenize(tokens, true);
      expect(text).toContain('<tools>\n{"type": "function", "function": {"name": "get_weather"');
      expect(text).toContain(
        '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "metric": true}}\n</tool_call><|im_end|>',
      );
      expect(text).toContain('<|im_start|>user\n<tool_response>\n{"celsius": 21}\n</tool_response><|im_end|>');
      expect(text.endsWith("</tool_response><|im_end|>\n<|im_start|>assistant\n")).toBe(true);
    } finally {
      await model.dispose();
      await llama.dispose();
    }
  });

  it("answers after a tool result", async () => {
    const body = await chat({
      messages: [
        ...ask,
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris","metric":true}' } }],
        },
        { role: "tool", tool_call_id: "c1", content: '{"celsius": 21}' },
      ],
      tool_choice: "none",
      max_completion_tokens: 6,
    });
    expect(body.choices[0].finish_reason).toBe("length");
  });

  it("refuses, per line and by name, what it cannot honour", async () => {
    expect(await refusal({ tools, tool_choice: { type: "function", function: { name: "nope" } } })).toMatchObject({
      code: "invalid_request",
      param: "tool_choice.function.name",
    });
    expect(await refusal({ tools: [{ type: "custom", custom: { name: "x" } }] })).toMatchObject({ param: "tools[0].type" });
    expect(await refusal({ tool_choice: "required" })).toMatchObject({ param: "tool_choice" });
    expect(await refusal({ tools, n: 2 })).toMatchObject({ code: "unsupported_value", param: "n" });
    expect(await refusal({ tools, logprobs: true })).toMatchObject({ param: "logprobs" });
    const pattern = { type: "object", properties: { s: { type: "string", pattern: "^a" } } };
    expect(await refusal({ tools: [{ type: "function", function: { name: "f", parameters: pattern } }] })).toMatchObject({
      code: "unsupported_value",
      param: "tools[0].function.parameters",
      message: expect.stringMatching(/pattern/),
    });
    const call = { id: "c1", type: "function", function: { name: "get_weather", arguments: "{}" } };
    expect(await refusal({ messages: [...ask, { role: "assistant", tool_calls: [call] }] })).toMatchObject({
      param: "messages[1].tool_calls[0].id",
    });
    expect(await refusal({ messages: [...ask, { role: "tool", tool_call_id: "zz", content: "x" }] })).toMatchObject({
      param: "messages[1].tool_call_id",
    });
    const badArgs = { ...call, function: { name: "get_weather", arguments: "not json" } };
    expect(
      await refusal({
        messages: [...ask, { role: "assistant", tool_calls: [badArgs] }, { role: "tool", tool_call_id: "c1", content: "x" }],
      }),
    ).toMatchObject({ param: "messages[1].tool_calls[0].function.arguments" });
    expect(await refusal({ functions: [{ name: "f" }] })).toMatchObject({ code: "unsupported_parameter", param: "functions" });
  });
});

const stories = sharedModel("stories260K.gguf") ?? "";
describe.skipIf(!stories)("tools on a model without a chat template (needs ../shared/models/stories260K.gguf)", () => {
  it("refuses tools per line, and accepts tool_choice none", async () => {
    const plain = await createEngine({
      modelPath: stories,
      generatedModel: false,
      gpu: false,
      threads: 1,
      sequences: 1,
      contextSize: 256,
      embeddingContexts: 1,
    });
    try {
      const b = new LlamaBackend(plain);
      expect(b.info.settings.toolCalling).toBe(false);
      const err = (() => {
        try {
          b.check(parseRequest("/v1/chat/completions", { messages: ask, tools, tool_choice: "required" }));
        } catch (e: any) {
          return e;
        }
      })();
      expect(err).toMatchObject({ code: "unsupported_parameter", param: "tools" });
      expect(err.message).toMatch(/no function-calling format/);
      const request = parseRequest("/v1/chat/completions", { messages: ask, tools, tool_choice: "none", max_completion_tokens: 4 });
      b.check(request);
      expect(((await b.execute(request)).body as any).choices[0].message.tool_calls).toBeUndefined();
    } finally {
      await plain.close();
    }
  });
});

describe("the phases of a tool-call answer (scripted model turns over the real tokenizer)", () => {
  let model: LlamaModel;
  let dispose: () => Promise<void>;
  beforeAll(async () => {
    const llama = await getLlama({ build: "never", gpu: false });
    model = await llama.loadModel({ modelPath: await ensureGeneratedModel() });
    dispose = async () => {
      await model.dispose();
      await llama.dispose();
    };
  });
  afterAll(() => dispose?.());

  /** Each phase returns the next scripted text; the prompts it was given are kept. */
  const scripted = (turns: Array<Partial<GenerationResult> & { text: string }>) => {
    const prompts: string[] = [];
    const run: Phase = async (tokens, params) => {
      prompts.push(model.detokenize(tokens, true));
      const turn = turns.shift();
      if (!turn) throw new Error(`no scripted turn left (params ${JSON.stringify(params)})`);
      const r = { completionTokens: 3, finishReason: "stop" as const, promptTokens: tokens.length, cachedPromptTokens: 0, ...turn };
      return { ...r, choices: [r] };
    };
    return { run, prompts };
  };
  const setup = (messages = [{ role: "user" as const, content: "hi" }]) => {
    const format = chooseChatFormat(model);
    if (!format.tools) throw new Error("the generated model's template should have a tool format");
    const functions = [
      { name: "a", parameters: { type: "object", properties: { x: { type: "integer" } } } },
      { name: "b", parameters: { type: "object", properties: {} } },
    ];
    return { syntax: format.tools, rendered: renderChat(model, format, messages, functions), functions };
  };

  it("auto: text until the trigger becomes the content, then calls follow while the model writes the trigger again", async () => {
    const { syntax, rendered, functions } = setup();
    const { run, prompts } = scripted([
      { text: "Let me check.", stoppedBy: "<tool_call>" },
      { text: "a" },
      { text: '{"x": 1}' },
      { text: "\n", stoppedBy: "<tool_call>" },
      { text: "b" },
      { text: "{}" },
      { text: "", finishReason: "stop" },
    ]);
    const r = await generateWithTools(model, syntax, rendered, { tools: { functions, choice: "auto", parallel: true } }, run);
    expect(r.finishReason).toBe("tool_calls");
    expect(r.text).toBe("Let me check.");
    expect(r.toolCalls).toEqual([
      { name: "a", arguments: '{"x": 1}' },
      { name: "b", arguments: "{}" },
    ]);
    // What the model was shown before writing b's arguments: both calls in the template's syntax so far.
    expect(prompts[5]).toContain(
      'Let me check.<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>\n<tool_call>\n{"name": "b", "arguments": ',
    );
  });

  it("auto without the trigger is a plain answer", async () => {
    const { syntax, rendered, functions } = setup();
    const { run } = scripted([{ text: "Hello there.", completionTokens: 4 }]);
    const r = await generateWithTools(model, syntax, rendered, { tools: { functions, choice: "auto", parallel: true } }, run);
    expect(r).toMatchObject({ text: "Hello there.", finishReason: "stop", completionTokens: 4 });
    expect(r.toolCalls).toBeUndefined();
  });

  it("a budget that runs out inside the arguments returns the call cut short, with finish_reason length", async () => {
    const { syntax, rendered, functions } = setup();
    const { run } = scripted([{ text: "a" }, { text: '{"x": 12', finishReason: "length" }]);
    const r = await generateWithTools(
      model,
      syntax,
      rendered,
      { maxTokens: 60, tools: { functions, choice: "required", parallel: true } },
      run,
    );
    expect(r.finishReason).toBe("length");
    expect(r.toolCalls).toEqual([{ name: "a", arguments: '{"x": 12' }]);
    expect(r.completionTokens).toBeLessThanOrEqual(60);
  });
});

describe("a tool call cut by the token budget (per line)", () => {
  it("keeps the call with what was written of it and finish_reason length, at every budget from 1 to a whole call", async () => {
    const whole = await chat({ tool_choice: { type: "function", function: { name: "get_weather" } }, max_completion_tokens: 200 });
    const full = whole.choices[0].message.tool_calls[0].function.arguments as string;
    const used = whole.usage.completion_tokens as number;
    let withCall = 0;
    for (let budget = 1; budget < used; budget++) {
      const body = await chat({ tool_choice: { type: "function", function: { name: "get_weather" } }, max_completion_tokens: budget });
      const choice = body.choices[0];
      expect(choice.finish_reason, `budget ${budget}`).toBe("length");
      expect(body.usage.completion_tokens, `budget ${budget}`).toBeLessThanOrEqual(budget);
      const calls = choice.message.tool_calls;
      if (!calls) continue;
      withCall++;
      expect(calls).toHaveLength(1);
      expect(calls[0]).toMatchObject({ type: "function", function: { name: "get_weather" } });
      // The arguments are the start of what a larger budget writes (greedy sampling).
      expect(full.startsWith(calls[0].function.arguments), `budget ${budget}`).toBe(true);
    }
    // Every budget past the call's opening marker reports the call.
    expect(withCall).toBeGreaterThan(used / 2);
  }, 120_000);
});
