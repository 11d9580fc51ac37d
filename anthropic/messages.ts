// Anthropic's Messages requests (`/v1/messages` lines, which the Message Batches API writes) served over a
// backend's chat: the Messages params become the chat body that asks for the same answer, and the chat
// completion becomes Anthropic's `message`. What the translation cannot carry is refused by its Messages name,
// and a refusal from the chat backend names the Messages field it came from (stop as stop_sequences...).

import type { BackendResult } from "../openai/backend.js";
import type { ChatBody, ChatMessageBody } from "../openai/bodies.js";
import { type Origins, type ParamNames, renamedParam } from "../openai/chat-origins.js";
import { invalidParameter, RequestError, unsupportedParameter, unsupportedValue } from "../openai/errors.js";
import { hexId } from "../openai/ids.js";
import type { ContentBlockParam, MessageParam, MessagesParams } from "./params.js";

/** Fields Anthropic defines that need services a local batch backend does not have. */
const UNSUPPORTED: Array<[keyof MessagesParams, string]> = [
  ["container", "code-execution containers are not available here"],
  ["context_management", "context management is not supported"],
  ["mcp_servers", "MCP servers are not reachable from this service"],
  ["inference_geo", "a batch runs where this service runs"],
];

/** The tier a synchronous Messages request names in its usage (a batch's says "batch"). */
export const SYNC_SERVICE_TIER = "standard";

/** What the chat path takes (OpenAI's bound). */
const MAX_STOPS = 4;

type ToolCall = NonNullable<Extract<ChatMessageBody, { role: "assistant" }>["tool_calls"]>[number];

export interface TranslatedMessages {
  chat: ChatBody;
  /** Anthropic's top_k, which chat bodies do not carry. */
  topK?: number;
  /** For each chat message, the Messages path it came from. */
  origins: Origins;
}

export function toChatFromMessages(p: MessagesParams): TranslatedMessages {
  for (const [field, why] of UNSUPPORTED) {
    const v = p[field];
    if (v != null && !(Array.isArray(v) && v.length === 0)) throw unsupportedParameter(field, `'${field}' is not supported: ${why}.`);
  }
  if (p.stream) throw invalidParameter("stream", "stream is not supported in a batch: the whole answer is written to the results.");
  if (p.thinking && p.thinking.type !== "disabled")
    throw unsupportedValue("thinking.type", `Extended thinking ('${p.thinking.type}') needs a reasoning model; none is served here.`);
  if (p.output_config?.effort != null)
    throw unsupportedParameter("output_config.effort", "Effort control needs a reasoning model; none is served here.");

  const { messages, origins } = toChatMessages(p);
  const chat: ChatBody = { model: p.model, messages, max_tokens: p.max_tokens };
  if (p.stop_sequences?.length) {
    if (p.stop_sequences.length > MAX_STOPS)
      throw unsupportedValue(
        "stop_sequences",
        `At most ${MAX_STOPS} stop sequences are served here; this request has ${p.stop_sequences.length}.`,
      );
    chat.stop = p.stop_sequences;
  }
  if (p.temperature != null) chat.temperature = p.temperature;
  if (p.top_p != null) chat.top_p = p.top_p;
  const format = p.output_config?.format;
  if (format) chat.response_format = { type: "json_schema", json_schema: { name: "output", schema: format.schema, strict: true } };
  if (p.tools?.length) {
    chat.tools = p.tools.map((tool, i) => {
      if (tool.type != null && tool.type !== "custom")
        throw unsupportedValue(`tools[${i}].type`, `Server tools ('${tool.type}') are not available here: declare client tools.`);
      if (!tool.input_schema)
        throw new RequestError(
          `Missing required parameter: 'tools[${i}].input_schema'.`,
          "missing_required_parameter",
          false,
          `tools[${i}].input_schema`,
        );
      const { type: _t, name, description, input_schema, cache_control: _c, strict, ...rest } = tool;
      const extra = Object.keys(rest)[0];
      if (extra) throw unsupportedParameter(`tools[${i}].${extra}`, `'tools[${i}].${extra}' is not supported.`);
      return { type: "function" as const, function: { name, description, parameters: input_schema, strict } };
    });
  }
  const choice = p.tool_choice;
  if (choice) {
    if (choice.type === "auto") chat.tool_choice = "auto";
    else if (choice.type === "any") chat.tool_choice = "required";
    else if (choice.type === "none") chat.tool_choice = "none";
    else chat.tool_choice = { type: "function", function: { name: choice.name } };
    if ("disable_parallel_tool_use" in choice && choice.disable_parallel_tool_use) chat.parallel_tool_calls = false;
  }
  const out: TranslatedMessages = { chat, origins };
  if (p.top_k) out.topK = p.top_k;
  return out;
}

/** The system prompt first; a user turn's tool results become tool messages ahead of its text. */
function toChatMessages(p: MessagesParams): { messages: ChatMessageBody[]; origins: Origins } {
  const messages: ChatMessageBody[] = [];
  const origins: Origins = [];
  const push = (m: ChatMessageBody, path: string, calls: string[] = []) => {
    messages.push(m);
    origins.push({ path, calls });
  };
  if (p.system !== undefined) {
    const text = typeof p.system === "string" ? p.system : p.system.map((b) => b.text).join("\n");
    if (text) push({ role: "system", content: text }, "system");
  }
  for (const [i, m] of p.messages.entries()) {
    const at = `messages[${i}]`;
    if (m.role === "assistant" && i === p.messages.length - 1)
      throw unsupportedValue(at, "A final assistant message (a prefilled answer) is not supported: end with a user message.");
    if (typeof m.content === "string") {
      push({ role: m.role, content: m.content }, at);
      continue;
    }
    if (m.role === "assistant") pushAssistant(m, at, push);
    else pushUser(m, at, push);
  }
  return { messages, origins };
}

type Push = (m: ChatMessageBody, path: string, calls?: string[]) => void;

function pushAssistant(m: MessageParam, at: string, push: Push): void {
  const texts: string[] = [];
  const calls: ToolCall[] = [];
  const callPaths: string[] = [];
  for (const [j, block] of (m.content as ContentBlockParam[]).entries()) {
    if (block.type === "text") texts.push((block as { text: string }).text);
    else if (block.type === "tool_use") {
      const use = block as { id: string; name: string; input: Record<string, unknown> };
      calls.push({ id: use.id, type: "function", function: { name: use.name, arguments: JSON.stringify(use.input) } });
      callPaths.push(`${at}.content[${j}]`);
    } else throw unsupportedBlock(block.type, `${at}.content[${j}]`);
  }
  const content = texts.length ? texts.join("\n") : null;
  push(calls.length ? { role: "assistant", content, tool_calls: calls } : { role: "assistant", content: content ?? "" }, at, callPaths);
}

function pushUser(m: MessageParam, at: string, push: Push): void {
  const texts: string[] = [];
  for (const [j, block] of (m.content as ContentBlockParam[]).entries()) {
    const where = `${at}.content[${j}]`;
    if (block.type === "text") texts.push((block as { text: string }).text);
    else if (block.type === "tool_result") {
      const r = block as { tool_use_id: string; content?: string | Array<{ type: string; text?: unknown }>; is_error?: boolean };
      const parts = typeof r.content === "string" ? [r.content] : (r.content ?? []).map((c, k) => textBlock(c, `${where}.content[${k}]`));
      // A chat template has no slot for a failed call; the model reads that it failed.
      const text = parts.join("\n");
      push({ role: "tool", tool_call_id: r.tool_use_id, content: r.is_error ? `Error: ${text}` : text }, where);
    } else throw unsupportedBlock(block.type, where);
  }
  if (texts.length) push({ role: "user", content: texts.join("\n") }, at);
}

function textBlock(c: { type: string; text?: unknown }, at: string): string {
  if (c.type === "text" && typeof c.text === "string") return c.text;
  throw unsupportedBlock(c.type, at);
}

function unsupportedBlock(type: string, at: string): RequestError {
  const why = ["image", "document", "search_result"].includes(type)
    ? "this deployment serves a text-only model"
    : ["thinking", "redacted_thinking"].includes(type)
      ? "no reasoning model is served here"
      : "only text, tool_use and tool_result blocks are served here";
  return unsupportedValue(`${at}.type`, `Content blocks of type '${type}' are not supported: ${why}.`);
}

/** How Messages names what chat calls otherwise (a tool message is a `tool_result` block of a user turn). */
const MESSAGES_NAMES: ParamNames = {
  whole: "messages",
  message: (rest) => (rest === ".tool_call_id" ? ".tool_use_id" : rest.startsWith(".content") ? "" : rest),
  call: (rest) => rest.replace(/^\.function\.arguments/, ".input").replace(/^\.function\./, "."),
  renames: [
    [/^stop/, "stop_sequences"],
    [/^tools\[(\d+)\]\.function\.parameters/, "tools[$1].input_schema"],
    [/^tools\[(\d+)\]\.function\./, "tools[$1]."],
    [/^tool_choice\.function\./, "tool_choice."],
    [/^parallel_tool_calls$/, "tool_choice.disable_parallel_tool_use"],
    [/^response_format\.json_schema\.schema/, "output_config.format.schema"],
    [/^response_format/, "output_config.format"],
  ],
};

/** A chat-side parameter name as the Messages field it was translated from. */
export const messagesParam = (param: string | null, origins: Origins) => renamedParam(param, origins, MESSAGES_NAMES);

interface ChatCompletionLike {
  model: string;
  choices: Array<{
    message: { content: string | null; tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }> };
    finish_reason: string;
  }>;
  usage: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens: number } };
}

/** Anthropic's `message` for the request, built from the chat completion that answered it. */
export function toAnthropicMessage(completion: ChatCompletionLike, result: Pick<BackendResult, "stops">): Record<string, unknown> {
  const [choice] = completion.choices;
  if (!choice) throw invalidParameter(null, "The backend returned no choice.");
  const content: object[] = [];
  const calls = choice.message.tool_calls ?? [];
  const text = choice.message.content ?? "";
  if (text || calls.length === 0) content.push({ type: "text", text, citations: null });
  for (const call of calls) {
    const input = parsedObject(call.function.arguments);
    // A call cut by max_tokens has arguments that do not parse: Anthropic's `input` must be an object.
    // Anthropic's ids, which clients send back as tool_use_id: the chat side's call_ ids are OpenAI's.
    if (input) content.push({ type: "tool_use", id: `toolu_${hexId()}`, name: call.function.name, input, caller: { type: "direct" } });
  }
  const stop = result.stops?.[0] ?? null;
  const reason =
    choice.finish_reason === "tool_calls"
      ? "tool_use"
      : choice.finish_reason === "length"
        ? "max_tokens"
        : choice.finish_reason === "content_filter"
          ? "refusal"
          : stop !== null
            ? "stop_sequence"
            : "end_turn";
  const { prompt_tokens, completion_tokens, prompt_tokens_details } = completion.usage;
  const cached = prompt_tokens_details?.cached_tokens ?? 0;
  return {
    id: `msg_${hexId()}`,
    type: "message",
    role: "assistant",
    model: completion.model,
    content,
    stop_reason: reason,
    stop_sequence: reason === "stop_sequence" ? stop : null,
    stop_details: null,
    container: null,
    usage: {
      // Anthropic counts a cached prefix apart from the input read fresh.
      input_tokens: prompt_tokens - cached,
      output_tokens: completion_tokens,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: cached,
      cache_creation: null,
      server_tool_use: null,
      service_tier: "batch",
      inference_geo: null,
    },
  };
}

function parsedObject(text: string): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(text) as unknown;
    return v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
