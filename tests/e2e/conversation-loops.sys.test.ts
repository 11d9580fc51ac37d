// The official clients' conversation loops through the real service, on the generated model (its template has a
// tool-call format): each reply appended to the conversation as the client returned it (a tool's result after a
// call), and the next request answered. Chat through openai (npm, and Python with its pydantic messages), the
// Responses API's output items sent back as input, Anthropic's content blocks sent back as the assistant's turn.
// The Python half skips with a note where no Python has the openai and anthropic packages.
import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import Anthropic from "@anthropic-ai/sdk";
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";
import { pythonWith } from "../../testkit/python.js";
import { repoRoot } from "../../testkit/repo-root.js";
import { openaiClient, startTestService, type TestService } from "../helpers/service.js";

let svc: TestService;
let client: OpenAI;
beforeAll(async () => {
  svc = await startTestService({ MODEL_PATH: await ensureGeneratedModel(), CONTEXT_SIZE: "2048", SEQUENCES: "2" });
  client = openaiClient(svc);
});
afterAll(async () => svc?.close());

const weather = {
  type: "object",
  properties: { city: { type: "string", enum: ["Paris", "Rome"] } },
  required: ["city"],
  additionalProperties: false,
};
const chatTools: OpenAI.ChatCompletionTool[] = [{ type: "function", function: { name: "get_weather", parameters: weather } }];

describe("chat: the reply appended as the openai client returned it", () => {
  it("answers the next turn after a plain reply, sent back whole (annotations and refusal with it)", async () => {
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "Hello" }];
    const first = await client.chat.completions.create({ model: "any", messages, max_tokens: 4 });
    expect(first.choices[0].message).toMatchObject({ role: "assistant", refusal: null, annotations: [] });
    messages.push(first.choices[0].message);
    messages.push({ role: "user", content: "And then?" });
    const second = await client.chat.completions.create({ model: "any", messages, max_tokens: 4 });
    expect(second.choices[0].message.role).toBe("assistant");
    // The conversation is longer by the reply and the new turn: the reply was read, not dropped.
    expect(second.usage!.prompt_tokens).toBeGreaterThan(first.usage!.prompt_tokens + first.usage!.completion_tokens);
  });

  it("answers after a tool call and its result, the call's reply sent back whole", async () => {
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "Weather in Rome?" }];
    const called = await client.chat.completions.create({ model: "any", messages, tools: chatTools, tool_choice: "required" });
    const reply = called.choices[0].message;
    expect(reply.tool_calls?.length).toBeGreaterThan(0);
    messages.push(reply);
    for (const call of reply.tool_calls ?? []) messages.push({ role: "tool", tool_call_id: call.id, content: '{"celsius": 21}' });
    const answered = await client.chat.completions.create({ model: "any", messages, tools: chatTools, tool_choice: "none", max_tokens: 4 });
    expect(answered.choices[0].message.role).toBe("assistant");
    expect(answered.choices[0].finish_reason).not.toBe("tool_calls");
  });

  it("takes an earlier reply that refused as what the assistant said", async () => {
    const refused = { role: "assistant" as const, content: null, refusal: "I cannot help with that.", annotations: [] };
    const withRefusal = await client.chat.completions.create({
      model: "any",
      messages: [{ role: "user", content: "Hello" }, refused, { role: "user", content: "Why not?" }],
      max_tokens: 2,
    });
    const withoutRefusal = await client.chat.completions.create({
      model: "any",
      messages: [
        { role: "user", content: "Hello" },
        { ...refused, refusal: null },
        { role: "user", content: "Why not?" },
      ],
      max_tokens: 2,
    });
    expect(withRefusal.usage!.prompt_tokens).toBeGreaterThan(withoutRefusal.usage!.prompt_tokens);
  });
});

describe("the Responses API and Anthropic's Messages: the output sent back as input", () => {
  it("answers a response whose input holds the previous response's output items (a function call and its output)", async () => {
    const tools: OpenAI.Responses.Tool[] = [{ type: "function", name: "get_weather", parameters: weather, strict: true }];
    const input: OpenAI.Responses.ResponseInput = [{ role: "user", content: "Weather in Rome?" }];
    const called = await client.responses.create({ model: "any", input, tools, tool_choice: "required" });
    input.push(...(called.output as OpenAI.Responses.ResponseInputItem[]));
    const call = called.output.find((o) => o.type === "function_call");
    expect(call).toBeDefined();
    input.push({ type: "function_call_output", call_id: (call as OpenAI.Responses.ResponseFunctionToolCall).call_id, output: "21" });
    const said = await client.responses.create({ model: "any", input, tools, tool_choice: "none", max_output_tokens: 8 });
    expect(said.output.some((o) => o.type === "message")).toBe(true);
    input.push(...(said.output as OpenAI.Responses.ResponseInputItem[]), { role: "user", content: "Thanks" });
    const next = await client.responses.create({ model: "any", input, max_output_tokens: 4 });
    expect(next.status).toMatch(/completed|incomplete/);
  });

  it("answers a message whose turns hold the previous message's content blocks (a tool use and its result)", async () => {
    const anthropic = new Anthropic({ apiKey: "unused", baseURL: svc.baseUrl, maxRetries: 0 });
    const tools = [{ name: "get_weather", input_schema: weather as Anthropic.Tool.InputSchema }];
    const messages: Anthropic.MessageParam[] = [{ role: "user", content: "Weather in Rome?" }];
    const called = await anthropic.messages.create({ model: "m", max_tokens: 256, messages, tools, tool_choice: { type: "any" } });
    messages.push({ role: "assistant", content: called.content });
    const uses = called.content.filter((b) => b.type === "tool_use");
    expect(uses.length).toBeGreaterThan(0);
    messages.push({ role: "user", content: uses.map((u) => ({ type: "tool_result" as const, tool_use_id: u.id, content: "21" })) });
    const said = await anthropic.messages.create({ model: "m", max_tokens: 8, messages, tools, tool_choice: { type: "none" } });
    messages.push({ role: "assistant", content: said.content }, { role: "user", content: "Thanks" });
    const next = await anthropic.messages.create({ model: "m", max_tokens: 4, messages });
    expect(next.role).toBe("assistant");
  });
});

const python = pythonWith("openai.types.responses") && pythonWith("anthropic.types.messages");
if (!python) console.warn("the Python clients' conversation loops are skipped: no Python with openai and anthropic");
describe.skipIf(!python)("the official Python clients", () => {
  it("answer the next turn after each reply appended as the client returned it (pydantic objects)", async () => {
    const run = await promisify(execFile)(python as string, [path.join(repoRoot, "tests/conformance/conversation_loops.py"), svc.baseUrl], {
      encoding: "utf8",
      timeout: 50_000,
    }).catch((e: { stdout?: string; stderr?: string; message: string }) => ({ stdout: e.stdout ?? e.message, stderr: e.stderr ?? "" }));
    expect(run.stdout + run.stderr).toBe("");
  });
});
