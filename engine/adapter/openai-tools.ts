// Chat tools between OpenAI's wire shapes and the engine: what a line may ask (checked per line, naming the
// field), the engine's ToolsParams, and the calls back as OpenAI's message.tool_calls.
import type { ChatBody, ChatMessageBody } from "../../openai/bodies.js";
import { invalidParameter, unsupportedParameter, unsupportedValue } from "../../openai/errors.js";
import { hexId } from "../../openai/ids.js";
import { toGrammarSchema } from "../generate/json-schema.js";
import type { ToolCall, ToolsParams } from "../types.js";

const NO_FORMAT = "The model's chat template has no function-calling format";

/** tool_choice as OpenAI defaults it: "auto" when tools are given, else "none". */
function choiceOf(body: ChatBody): ToolsParams["choice"] {
  const c = body.tool_choice;
  if (c == null) return body.tools?.length ? "auto" : "none";
  if (typeof c === "string") return c;
  return c.type === "function" ? { name: c.function.name } : "auto";
}

/** What is wrong anywhere comes first, then what this model cannot do, then what its grammar cannot enforce. */
export function checkTools(body: ChatBody, toolCalling: boolean): void {
  const tools = body.tools ?? [];
  const names = new Set<string>();
  for (const [i, tool] of tools.entries()) {
    if (tool.type !== "function") throw unsupportedValue(`tools[${i}].type`, "Custom tools are not supported: declare function tools.");
    if (names.has(tool.function.name)) throw invalidParameter(`tools[${i}].function.name`, `Two tools are named '${tool.function.name}'.`);
    names.add(tool.function.name);
  }
  const c = body.tool_choice;
  if (c != null && typeof c === "object" && c.type !== "function") {
    throw unsupportedValue("tool_choice", `tool_choice of type '${c.type}' is not supported: use none, auto, required or a function.`);
  }
  const choice = choiceOf(body);
  if (choice !== "none" && choice !== "auto" && tools.length === 0) {
    throw invalidParameter("tool_choice", "tool_choice requires tools: declare the functions the model may call.");
  }
  if (typeof choice === "object" && !names.has(choice.name)) {
    throw invalidParameter("tool_choice.function.name", `tool_choice names '${choice.name}', which is not among the tools.`);
  }
  checkToolMessages(body.messages, toolCalling);
  if (tools.length === 0 || choice === "none") return;
  if (!toolCalling) throw unsupportedParameter("tools", `${NO_FORMAT}, so it cannot call tools.`);
  // Each of these would shape a free-text answer; with tools the answer is written in phases (tool-calls.ts).
  if (body.n != null && body.n > 1) throw unsupportedValue("n", "n > 1 together with tools is not supported.");
  if (body.logprobs) throw unsupportedValue("logprobs", "logprobs together with tools are not supported.");
  if (body.response_format && body.response_format.type !== "text") {
    throw unsupportedValue("response_format", "A JSON response_format together with tools is not supported.");
  }
  for (const [i, tool] of tools.entries()) {
    const parameters = tool.type === "function" ? tool.function.parameters : undefined;
    if (parameters && Object.keys(parameters).length > 0) toGrammarSchema(parameters, `tools[${i}].function.parameters`);
  }
}

/** As OpenAI requires: every call is answered by a tool message, and every tool message answers a call. */
function checkToolMessages(messages: readonly ChatMessageBody[], toolCalling: boolean): void {
  const open = new Map<string, string>();
  for (const [i, m] of messages.entries()) {
    if (m.role === "assistant" && m.tool_calls?.length) {
      if (!toolCalling) throw unsupportedParameter(`messages[${i}].tool_calls`, `${NO_FORMAT}, so it cannot be shown tool calls.`);
      for (const [j, call] of m.tool_calls.entries()) {
        const at = `messages[${i}].tool_calls[${j}]`;
        if (call.type !== "function") throw unsupportedValue(`${at}.type`, "Custom tool calls are not supported.");
        if (!isJsonObject(call.function.arguments)) {
          throw invalidParameter(`${at}.function.arguments`, "A tool call's arguments must be a JSON object, as text.");
        }
        open.set(call.id, at);
      }
    } else if (m.role === "tool") {
      if (!open.delete(m.tool_call_id)) {
        throw invalidParameter(
          `messages[${i}].tool_call_id`,
          `The tool message answers '${m.tool_call_id}', which no earlier assistant message's tool_calls holds (or another tool message answered).`,
        );
      }
    } else if (open.size > 0) break;
  }
  const unanswered = open.entries().next().value;
  if (unanswered) {
    throw invalidParameter(`${unanswered[1]}.id`, `The tool call '${unanswered[0]}' has no tool message answering it.`);
  }
}

function isJsonObject(text: string): boolean {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === "object" && v !== null && !Array.isArray(v);
  } catch {
    return false;
  }
}

/** The engine's tools, or undefined when the line declares none. */
export function toolsParams(body: ChatBody): ToolsParams | undefined {
  if (!body.tools?.length) return undefined;
  const functions = body.tools.flatMap((t) => (t.type === "function" ? [t.function] : []));
  return {
    functions: functions.map((f) => ({ name: f.name, description: f.description, parameters: f.parameters })),
    choice: choiceOf(body),
    parallel: body.parallel_tool_calls ?? true,
  };
}

/** The engine's calls as message.tool_calls, each with a fresh id the next turn's tool messages answer. */
export const toolCallsBody = (calls: readonly ToolCall[]) =>
  calls.map((c) => ({ id: `call_${hexId()}`, type: "function" as const, function: { name: c.name, arguments: c.arguments } }));
