// Chat messages to prompt tokens, through the model's chat template.
import {
  type ChatHistoryItem,
  type ChatModelFunctions,
  type ChatModelResponse,
  ChatWrapper,
  GeneralChatWrapper,
  JinjaTemplateChatWrapper,
  type LlamaModel,
  LlamaText,
  resolveChatWrapper,
  type Token,
} from "node-llama-cpp";
import { invalidRequest } from "../errors.js";
import { CHATML_TEMPLATE } from "../gguf/tokenizer.js";
import type { ChatMessage, ToolFunction } from "../types.js";
import { withBos } from "./tokens.js";

export interface ChatFormat {
  wrapper: ChatWrapper;
  /** True when the GGUF carries a chat template (tokenizer.chat_template). */
  hasChatTemplate: boolean;
  /** The template's own function-calling syntax; null when it has none. */
  tools: ToolSyntax | null;
}

/** How a call is written: prefix, name, paramsPrefix, the arguments as JSON, suffix (engine/generate/tool-calls.ts). */
export interface ToolSyntax {
  prefix: LlamaText;
  paramsPrefix: LlamaText;
  suffix: LlamaText;
  /** Between two calls of one answer. */
  betweenCalls: LlamaText;
  /** The start of the prefix, whose appearance in free text means the model is making a call. */
  trigger: string;
}

export interface RenderedChat {
  tokens: Token[];
  stopStrings: string[];
  stopTokens: Set<Token>;
}

const ROLES = new Set(["system", "developer", "user", "assistant", "tool"]);

/**
 * The model's own template when it has one (node-llama-cpp swaps in an equivalent built-in wrapper where
 * one exists, else renders the Jinja template). Without a template, the plain "### Human / ### Assistant"
 * wrapper: node-llama-cpp's guess from names would pick Llama 2's [INST] format for any model whose
 * beginning token is "<s>", which a base model such as stories260K never saw either.
 * The generated models' template is rendered as Jinja at once: it matches none of the built-in wrappers, and
 * node-llama-cpp's search renders and tokenizes sample chats for each of them, 1.1-1.3 s of a start
 * (tests/engine/tools.int.test.ts checks that the search ends on the same wrapper).
 */
export function chooseChatFormat(model: LlamaModel, search?: "auto"): ChatFormat {
  const template = model.fileInfo.metadata?.tokenizer?.chat_template;
  const hasChatTemplate = typeof template === "string" && template.trim() !== "";
  if (!hasChatTemplate) return { wrapper: new GeneralChatWrapper(), hasChatTemplate, tools: null };
  const type = search ?? (template === CHATML_TEMPLATE ? "jinjaTemplate" : "auto");
  const wrapper = resolveChatWrapper(model, { type, fallbackToOtherWrappersOnJinjaError: true });
  return { wrapper, hasChatTemplate, tools: toolSyntaxOf(wrapper) };
}

/**
 * Every node-llama-cpp wrapper can document functions in its own invented "||call:" syntax, but a model was
 * trained on its template's syntax only: tools are offered where the template has one (read from a Jinja
 * template, or a built-in wrapper's own), never the library's fallback.
 */
function toolSyntaxOf(wrapper: ChatWrapper): ToolSyntax | null {
  const own =
    wrapper instanceof JinjaTemplateChatWrapper
      ? wrapper.usingJinjaFunctionCallTemplate
      : wrapper.settings.functions !== ChatWrapper.defaultSettings.functions;
  if (!own) return null;
  const { call, parallelism } = wrapper.settings.functions;
  const prefix = LlamaText(call.prefix);
  const text = prefix.toString();
  // "<tool_call>\n{\"name\": \"" is announced by its first line; the model may space the rest its own way.
  const trigger =
    text
      .split("\n")
      .find((line) => line.trim() !== "")
      ?.trim() ?? "";
  if (trigger === "") return null;
  return {
    prefix,
    paramsPrefix: LlamaText(call.paramsPrefix),
    suffix: LlamaText(call.suffix),
    betweenCalls: LlamaText(parallelism?.call.betweenCalls ?? ""),
    trigger,
  };
}

/**
 * OpenAI roles onto node-llama-cpp's history: developer is the newer name of system. An assistant's tool
 * calls become function calls in its response, each carrying the result its tool message gave, so the
 * template writes both in its own syntax; a tool message answering no call is shown as a user turn saying
 * what it is.
 */
export function toChatHistory(messages: readonly ChatMessage[]): ChatHistoryItem[] {
  if (!Array.isArray(messages) || messages.length === 0) throw invalidRequest("messages must be a non-empty list.");
  const results = new Map(messages.filter((m) => m?.role === "tool" && m.toolCallId).map((m) => [m.toolCallId, m.content]));
  const answered = new Set<string>();
  const history: ChatHistoryItem[] = [];
  for (const [i, m] of messages.entries()) {
    if (!m || !ROLES.has(m.role)) throw invalidRequest(`messages[${i}].role must be one of ${[...ROLES].join(", ")}.`);
    if (typeof m.content !== "string") throw invalidRequest(`messages[${i}].content must be a string.`);
    if (m.role === "system" || m.role === "developer") history.push({ type: "system", text: m.content });
    else if (m.role === "assistant") {
      const response: ChatModelResponse["response"] = m.content ? [m.content] : [];
      for (const call of m.toolCalls ?? []) {
        answered.add(call.id);
        response.push({
          type: "functionCall",
          name: call.name,
          params: JSON.parse(call.arguments),
          result: resultValue(results.get(call.id)),
        });
      }
      history.push({ type: "model", response });
    } else if (m.role === "tool") {
      if (!m.toolCallId || !answered.has(m.toolCallId)) history.push({ type: "user", text: `Tool result:\n${m.content}` });
    } else history.push({ type: "user", text: m.content });
  }
  // An empty model turn at the end asks the template for the assistant's opening (add_generation_prompt);
  // after tool results the model's turn that made the calls is the one that goes on.
  const last = messages[messages.length - 1];
  if (!(last?.role === "tool" && last.toolCallId && answered.has(last.toolCallId))) history.push({ type: "model", response: [] });
  return history;
}

/** Templates write a result as JSON: JSON text goes in as its value (so it is not quoted twice), other text as a string. */
function resultValue(content: string | undefined): unknown {
  if (content === undefined) return undefined;
  try {
    return JSON.parse(content);
  } catch {
    return content;
  }
}

export function renderChat(
  model: LlamaModel,
  format: ChatFormat,
  messages: readonly ChatMessage[],
  functions: readonly ToolFunction[] = [],
): RenderedChat {
  const chatHistory = toChatHistory(messages);
  const availableFunctions: ChatModelFunctions | undefined =
    functions.length === 0
      ? undefined
      : Object.fromEntries(functions.map((f) => [f.name, { description: f.description, params: f.parameters as never }]));
  let state: ReturnType<ChatWrapper["generateContextState"]>;
  try {
    state = format.wrapper.generateContextState({ chatHistory, availableFunctions, documentFunctionParams: true });
  } catch (err) {
    // Jinja templates reject what they do not support (e.g. roles that do not alternate).
    throw invalidRequest(`The model's chat template rejected the messages: ${err instanceof Error ? err.message : String(err)}`);
  }
  const tokens = withBos(model, state.contextText.tokenize(model.tokenizer));
  return { tokens, ...stopsOf(model, state.stopGenerationTriggers) };
}

/**
 * A wrapper's stop triggers are LlamaTexts. One that begins with a special token (ChatML's <|im_end|>) is
 * matched as that token, since special tokens have no text in the answer; everything else is matched as text.
 */
function stopsOf(model: LlamaModel, triggers: readonly LlamaText[]) {
  const stopStrings = new Set<string>();
  const stopTokens = new Set<Token>();
  for (const trigger of triggers) {
    const plain = trigger.values.every((v) => typeof v === "string");
    if (plain) {
      stopStrings.add(trigger.values.join(""));
      continue;
    }
    const tokens = LlamaText(trigger).tokenize(model.tokenizer);
    // "<|im_end|>\n": the turn is over at the special token; what a template writes after it is not the answer's.
    if (tokens.length >= 1 && model.isSpecialToken(tokens[0])) stopTokens.add(tokens[0]);
    else {
      const text = model.detokenize(tokens, false);
      if (text) stopStrings.add(text);
    }
  }
  return { stopStrings: [...stopStrings], stopTokens };
}
