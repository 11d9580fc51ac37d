// Anthropic's Messages served over a backend's chat (openai/over-chat.ts takes it beside OpenAI's Responses where the
// backends are built, backends/build.ts): anthropic/messages.ts translates each way, and a chat-side refusal names
// the Messages field it came from.
import type { Dialect } from "../openai/over-chat.js";
import { messagesParam, toAnthropicMessage, toChatFromMessages } from "./messages.js";
import type { MessagesParams } from "./params.js";

export const MESSAGES_DIALECT: Dialect = {
  endpoint: "/v1/messages",
  toChat(body: MessagesParams) {
    const { chat, topK, origins } = toChatFromMessages(body);
    return { chat, topK, rename: (p) => messagesParam(p, origins) };
  },
  answer: (_body: MessagesParams, completion: Parameters<typeof toAnthropicMessage>[0], result) => toAnthropicMessage(completion, result),
};
