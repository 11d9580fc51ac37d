// Chat messages to prompt tokens, through the model's chat template.
import {
  GeneralChatWrapper,
  LlamaText,
  resolveChatWrapper,
  type ChatHistoryItem,
  type ChatWrapper,
  type LlamaModel,
  type Token,
} from "node-llama-cpp";
import { invalidRequest } from "./errors.js";
import { withBos } from "./tokens.js";
import type { ChatMessage } from "./types.js";

export interface ChatFormat {
  wrapper: ChatWrapper;
  /** True when the GGUF carries a chat template (tokenizer.chat_template). */
  hasChatTemplate: boolean;
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
 */
export function chooseChatFormat(model: LlamaModel): ChatFormat {
  const template = model.fileInfo.metadata?.tokenizer?.chat_template;
  const hasChatTemplate = typeof template === "string" && template.trim() !== "";
  if (!hasChatTemplate) return { wrapper: new GeneralChatWrapper(), hasChatTemplate };
  return { wrapper: resolveChatWrapper(model, { fallbackToOtherWrappersOnJinjaError: true }), hasChatTemplate };
}

/**
 * OpenAI roles onto node-llama-cpp's history: developer is the newer name of system; a tool result, which
 * has no slot of its own in that history, is shown to the model as a user turn that says what it is.
 */
export function toChatHistory(messages: readonly ChatMessage[]): ChatHistoryItem[] {
  if (!Array.isArray(messages) || messages.length === 0) throw invalidRequest("messages must be a non-empty list.");
  const history = messages.map((m, i): ChatHistoryItem => {
    if (!m || !ROLES.has(m.role)) throw invalidRequest(`messages[${i}].role must be one of ${[...ROLES].join(", ")}.`);
    if (typeof m.content !== "string") throw invalidRequest(`messages[${i}].content must be a string.`);
    if (m.role === "system" || m.role === "developer") return { type: "system", text: m.content };
    if (m.role === "assistant") return { type: "model", response: [m.content] };
    if (m.role === "tool") return { type: "user", text: `Tool result:\n${m.content}` };
    return { type: "user", text: m.content };
  });
  // An empty model turn at the end asks the template for the assistant's opening (add_generation_prompt).
  history.push({ type: "model", response: [] });
  return history;
}

export function renderChat(model: LlamaModel, format: ChatFormat, messages: readonly ChatMessage[]): RenderedChat {
  const chatHistory = toChatHistory(messages);
  let state: ReturnType<ChatWrapper["generateContextState"]>;
  try {
    state = format.wrapper.generateContextState({ chatHistory });
  } catch (err) {
    // Jinja templates reject what they do not support (e.g. roles that do not alternate).
    throw invalidRequest(`The model's chat template rejected the messages: ${err instanceof Error ? err.message : String(err)}`);
  }
  const tokens = withBos(model, state.contextText.tokenize(model.tokenizer));
  return { tokens, ...stopsOf(model, state.stopGenerationTriggers) };
}

/**
 * A wrapper's stop triggers are LlamaTexts. One that is a single special token (ChatML's <|im_end|>) is
 * matched as a token, since special tokens have no text in the answer; everything else is matched as text.
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
    if (tokens.length === 1 && model.isSpecialToken(tokens[0])) stopTokens.add(tokens[0]);
    else {
      const text = model.detokenize(tokens, false);
      if (text) stopStrings.add(text);
    }
  }
  return { stopStrings: [...stopStrings], stopTokens };
}
