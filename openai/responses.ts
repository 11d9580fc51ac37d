// /v1/responses lines served by any backend that serves chat: the Responses body becomes the chat body that
// asks for the same answer, and the chat completion becomes a `response` object. Everything the translation
// cannot carry is refused by its Responses name, and a refusal from the chat backend names the Responses
// field it came from (max_completion_tokens is reported as max_output_tokens, messages[3] as input[2]...).
import type { ChatBody, ChatMessageBody } from "./bodies.js";
import { type Origins, type ParamNames, renamedParam } from "./chat-origins.js";
import { invalidParameter, unsupportedParameter, unsupportedValue } from "./errors.js";
import { hexId } from "./ids.js";
import type { ResponseBody, ResponseContentPart, ResponseFunctionTool, ResponseInputItem } from "./response-bodies.js";

// The schema lets no other tool have type "function".
const isFunctionTool = (t: NonNullable<ResponseBody["tools"]>[number]): t is ResponseFunctionTool => t.type === "function";

const LOGPROBS_INCLUDE = "message.output_text.logprobs";

/** Fields of the Responses API that need state or services a batch backend does not have. */
const UNSUPPORTED: Array<[keyof ResponseBody, string]> = [
  ["background", "background mode has no meaning inside a batch"],
  ["conversation", "stored conversations are not kept by this service"],
  ["previous_response_id", "stored responses are not kept by this service"],
  ["prompt", "stored prompt templates are not kept by this service"],
  ["reasoning", "reasoning options need a reasoning model"],
  ["context_management", "context management is not supported"],
  ["moderation", "moderation is not supported"],
  ["prompt_cache_options", "prompt cache options are not supported"],
  ["max_tool_calls", "a bound on built-in tool calls is not supported"],
];

export interface TranslatedRequest {
  chat: ChatBody;
  /** For each chat message, the Responses path it came from. */
  origins: Origins;
}

export function toChatBody(body: ResponseBody): TranslatedRequest {
  for (const [field, why] of UNSUPPORTED) {
    if (body[field] != null && body[field] !== false) throw unsupportedParameter(field, `'${field}' is not supported: ${why}.`);
  }
  if (body.truncation === "auto")
    throw unsupportedValue("truncation", 'truncation "auto" is not supported: an input that does not fit fails.');
  if (body.text?.verbosity != null) throw unsupportedParameter("text.verbosity", "Verbosity control is not supported.");
  const include = body.include ?? [];
  const other = include.find((i) => i !== LOGPROBS_INCLUDE);
  if (other) throw unsupportedValue("include", `include '${other}' is not supported; only '${LOGPROBS_INCLUDE}' is.`);

  const { messages, origins } = toMessages(body);
  const chat: ChatBody = { model: body.model, messages };
  if (body.max_output_tokens != null) chat.max_completion_tokens = body.max_output_tokens;
  if (body.temperature != null) chat.temperature = body.temperature;
  if (body.top_p != null) chat.top_p = body.top_p;
  if (include.length > 0 || body.top_logprobs != null) {
    chat.logprobs = true;
    if (body.top_logprobs != null) chat.top_logprobs = body.top_logprobs;
  }
  const format = body.text?.format;
  if (format?.type === "json_object") chat.response_format = { type: "json_object" };
  if (format?.type === "json_schema") {
    chat.response_format = {
      type: "json_schema",
      json_schema: { name: format.name, schema: format.schema, description: format.description, strict: format.strict },
    };
  }
  if (body.tools?.length) {
    chat.tools = body.tools.map((tool, i) => {
      if (!isFunctionTool(tool)) {
        throw unsupportedValue(`tools[${i}].type`, `Tools of type '${tool.type}' are not supported: declare function tools.`);
      }
      const fn = { name: tool.name, description: tool.description ?? undefined, parameters: tool.parameters ?? undefined };
      return { type: "function" as const, function: { ...fn, strict: tool.strict } };
    });
  }
  const choice = body.tool_choice;
  if (typeof choice === "string") chat.tool_choice = choice;
  else if (choice?.type === "function" && "name" in choice)
    chat.tool_choice = { type: "function", function: { name: String(choice.name) } };
  else if (choice) throw unsupportedValue("tool_choice", `tool_choice of type '${choice.type}' is not supported.`);
  if (body.parallel_tool_calls != null) chat.parallel_tool_calls = body.parallel_tool_calls;
  return { chat, origins };
}

/** Instructions first, as a system message; consecutive function calls form one assistant turn. */
function toMessages(body: ResponseBody): { messages: ChatMessageBody[]; origins: Origins } {
  const messages: ChatMessageBody[] = [];
  const origins: Origins = [];
  const push = (m: ChatMessageBody, path: string) => {
    messages.push(m);
    origins.push({ path, calls: [] });
  };
  if (body.instructions) push({ role: "system", content: body.instructions }, "instructions");
  const items: ResponseInputItem[] = typeof body.input === "string" ? [{ role: "user", content: body.input }] : body.input;
  for (const [i, item] of items.entries()) {
    const at = typeof body.input === "string" ? "input" : `input[${i}]`;
    if (item.type === undefined || item.type === "message") {
      const m = item as Extract<ResponseInputItem, { role: string }>;
      const text = typeof m.content === "string" ? m.content : textOf(m.content, at);
      if (m.role === "assistant") push({ role: "assistant", content: text }, at);
      else push({ role: m.role, content: text }, at);
    } else if (item.type === "function_call") {
      const call = item as Extract<ResponseInputItem, { type: "function_call" }>;
      let last = messages.at(-1);
      if (last?.role !== "assistant") {
        push({ role: "assistant", content: null }, at);
        last = messages.at(-1);
      }
      const turn = last as Extract<ChatMessageBody, { role: "assistant" }>;
      turn.tool_calls = [
        ...(turn.tool_calls ?? []),
        { id: call.call_id, type: "function", function: { name: call.name, arguments: call.arguments } },
      ];
      origins[origins.length - 1].calls.push(at);
    } else if (item.type === "function_call_output") {
      const out = item as Extract<ResponseInputItem, { type: "function_call_output" }>;
      if (typeof out.output !== "string") throw unsupportedValue(`${at}.output`, "Only text function call outputs are supported.");
      push({ role: "tool", tool_call_id: out.call_id, content: out.output }, at);
    } else {
      throw unsupportedValue(`${at}.type`, `Input items of type '${item.type}' are not supported.`);
    }
  }
  return { messages, origins };
}

function textOf(parts: readonly ResponseContentPart[], at: string): string {
  return parts
    .map((p, j) => {
      if (p.type === "input_text" || p.type === "output_text") return p.text as string;
      throw unsupportedValue(
        `${at}.content[${j}]`,
        `Content parts of type '${p.type}' are not supported: this deployment serves a text-only model.`,
      );
    })
    .join("\n");
}

/** How Responses names what chat calls otherwise. */
const RESPONSES_NAMES: ParamNames = {
  whole: "input",
  message: (rest) => rest.replace(/^\.tool_call_id$/, ".call_id"),
  call: (rest) =>
    rest
      .replace(/^\.function\.arguments/, ".arguments")
      .replace(/^\.id$/, ".call_id")
      .replace(/^\.function\./, "."),
  renames: [
    [/^messages$/, "input"],
    [/^max_completion_tokens$/, "max_output_tokens"],
    [/^response_format\.json_schema\./, "text.format."],
    [/^response_format/, "text.format"],
    [/^tools\[(\d+)\]\.function\./, "tools[$1]."],
    [/^tool_choice\.function\./, "tool_choice."],
    [/^(logprobs|top_logprobs)$/, "top_logprobs"],
  ],
};

/** A chat-side parameter name as the Responses field it was translated from. */
export const responsesParam = (param: string | null, origins: Origins) => renamedParam(param, origins, RESPONSES_NAMES);

interface ChatCompletionLike {
  id: string;
  created: number;
  model: string;
  choices: Array<{
    message: { content: string | null; tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }> };
    logprobs: { content: unknown[] | null } | null;
    finish_reason: string;
  }>;
  usage: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens: number } };
}

/** The `response` object OpenAI returns for the request, built from the chat completion that answered it. */
export function toResponseObject(body: ResponseBody, completion: ChatCompletionLike): Record<string, unknown> {
  const [choice] = completion.choices;
  if (!choice) throw invalidParameter(null, "The backend returned no choice.");
  const incomplete = choice.finish_reason === "length";
  const itemStatus = incomplete ? "incomplete" : "completed";
  const output: object[] = [];
  const calls = choice.message.tool_calls ?? [];
  if (choice.message.content || calls.length === 0) {
    output.push({
      type: "message",
      id: `msg_${hexId()}`,
      status: itemStatus,
      role: "assistant",
      content: [
        {
          type: "output_text",
          text: choice.message.content ?? "",
          annotations: [],
          ...(choice.logprobs?.content ? { logprobs: choice.logprobs.content } : {}),
        },
      ],
    });
  }
  for (const call of calls) {
    output.push({
      type: "function_call",
      id: `fc_${hexId()}`,
      call_id: call.id,
      name: call.function.name,
      arguments: call.function.arguments,
      status: itemStatus,
    });
  }
  const { prompt_tokens, completion_tokens, prompt_tokens_details } = completion.usage;
  return {
    id: `resp_${hexId()}`,
    object: "response",
    created_at: completion.created,
    status: incomplete ? "incomplete" : "completed",
    completed_at: Math.floor(Date.now() / 1000),
    background: false,
    error: null,
    incomplete_details: incomplete ? { reason: "max_output_tokens" } : null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    max_tool_calls: null,
    model: completion.model,
    output,
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    service_tier: "default",
    store: false,
    temperature: body.temperature ?? 1,
    text: { format: body.text?.format ?? { type: "text" } },
    tool_choice: body.tool_choice ?? "auto",
    tools: body.tools ?? [],
    top_logprobs: body.top_logprobs ?? 0,
    top_p: body.top_p ?? 1,
    truncation: "disabled",
    usage: {
      input_tokens: prompt_tokens,
      // Nothing is billed for writing a prompt cache here: the KV reuse of a batch costs no tokens.
      input_tokens_details: { cached_tokens: prompt_tokens_details?.cached_tokens ?? 0, cache_write_tokens: 0 },
      output_tokens: completion_tokens,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: prompt_tokens + completion_tokens,
    },
    user: body.user ?? null,
    metadata: body.metadata ?? {},
  };
}
