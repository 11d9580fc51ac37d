// Anthropic's streamed message: `message_start` (with the prompt's usage), a text block's `content_block_start`, `text_delta`s as the backend
// tells the answer, the block's stop, each tool_use block whole (its input as one `input_json_delta`), then
// `message_delta` (stop reason and usage) and `message_stop`, as @anthropic-ai/sdk's MessageStream accumulates them.
// The text told and the closing events add up to the final message's content.
import type { TokenUsage } from "../openai/backend.js";
import { SYNC_SERVICE_TIER } from "./messages.js";

type Json = Record<string, any>;

/** Each event's `type` is also its SSE event name. */
export interface MessageEvents {
  /** The prompt's tokens, as the final usage counts them: clients record the input tokens from here. */
  start(prompt: Pick<TokenUsage, "promptTokens" | "cachedTokens">): Json[];
  text(text: string): Json[];
  end(message: Json): Json[];
}

export function messageEvents(meta: { id: string; model: string }): MessageEvents {
  let told = "";
  /** The text block's index once it is open, and the next block's. */
  let textBlock: number | undefined;
  let next = 0;
  const ev = (type: string, fields: Json): Json => ({ type, ...fields });
  const openText = (): Json[] => {
    if (textBlock !== undefined) return [];
    textBlock = next++;
    return [ev("content_block_start", { index: textBlock, content_block: { type: "text", text: "", citations: null } })];
  };
  const delta = (text: string) => ev("content_block_delta", { index: textBlock, delta: { type: "text_delta", text } });

  return {
    start: ({ promptTokens, cachedTokens }) => [
      ev("message_start", {
        message: {
          id: meta.id,
          type: "message",
          role: "assistant",
          model: meta.model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          // The final message's usage is this one as message_delta updates it: the tier is named here or nowhere.
          usage: {
            input_tokens: promptTokens - cachedTokens,
            output_tokens: 0,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: cachedTokens,
            cache_creation: null,
            server_tool_use: null,
            service_tier: SYNC_SERVICE_TIER,
            inference_geo: null,
          },
        },
      }),
    ],
    text(text) {
      told += text;
      return [...openText(), delta(text)];
    },
    end(message) {
      const out: Json[] = [];
      const content = (message.content ?? []) as Json[];
      const final = content.find((b) => b.type === "text")?.text ?? "";
      const rest = final.startsWith(told) ? final.slice(told.length) : "";
      // An answer of no text still has its (empty) text block, as the message given whole does.
      if (rest || content.some((b) => b.type === "text")) out.push(...openText(), ...(rest ? [delta(rest)] : []));
      if (textBlock !== undefined) out.push(ev("content_block_stop", { index: textBlock }));
      for (const block of content.filter((b) => b.type === "tool_use")) {
        const index = next++;
        out.push(
          ev("content_block_start", { index, content_block: { ...block, input: {} } }),
          ev("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: JSON.stringify(block.input ?? {}) } }),
          ev("content_block_stop", { index }),
        );
      }
      const { input_tokens, output_tokens, cache_read_input_tokens, cache_creation_input_tokens } = message.usage ?? {};
      out.push(
        ev("message_delta", {
          delta: { stop_reason: message.stop_reason ?? null, stop_sequence: message.stop_sequence ?? null },
          usage: { input_tokens, output_tokens, cache_read_input_tokens, cache_creation_input_tokens },
        }),
        ev("message_stop", {}),
      );
      return out;
    },
  };
}
