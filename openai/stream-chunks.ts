// OpenAI's streamed answers: a chat completion as `chat.completion.chunk` objects, a completion as `text_completion`
// chunks, made from the text a backend tells as it generates and from the final body it returns. The chunks' text
// adds up to the final body's: what the backend could not tell as it went (a tool call, an echoed prompt, a stop
// string's cut) comes in each choice's closing chunk, with its finish_reason and log probabilities.

type Json = Record<string, any>;

export interface StreamMeta {
  id: string;
  created: number;
  model: string;
  serviceTier: string;
  /** `stream_options.include_usage`: every chunk carries `usage: null`, and a last chunk with no choices the usage. */
  includeUsage: boolean;
}

export interface ChunkStream {
  /** The chunk telling a piece of choice `index`'s answer. */
  text(index: number, text: string): Json;
  /** The closing chunks, from the final body. */
  end(body: Json): Json[];
}

export type StreamedEndpoint = "/v1/chat/completions" | "/v1/completions";

export function chunkStream(endpoint: StreamedEndpoint, meta: StreamMeta): ChunkStream {
  const told = new Map<number, string>();
  const chat = endpoint === "/v1/chat/completions";
  const usage = meta.includeUsage ? { usage: null } : {};
  const head = chat
    ? {
        id: meta.id,
        object: "chat.completion.chunk",
        created: meta.created,
        model: meta.model,
        service_tier: meta.serviceTier,
        system_fingerprint: null,
      }
    : // OpenAI's Completion has no service_tier.
      { id: meta.id, object: "text_completion", created: meta.created, model: meta.model };
  const chunk = (choice: Json): Json => ({ ...head, choices: [choice], ...usage });
  /** A chat delta opens with the role, once per choice. */
  const delta = (index: number, fields: Json): Json => (told.has(index) ? fields : { role: "assistant", ...fields });

  return {
    text(index, text) {
      const choice = chat
        ? { index, delta: delta(index, { content: text }), logprobs: null, finish_reason: null }
        : { text, index, logprobs: null, finish_reason: null };
      told.set(index, (told.get(index) ?? "") + text);
      return chunk(choice);
    },
    end(body) {
      const out: Json[] = [];
      for (const c of (body.choices ?? []) as Json[]) {
        const final: string = (chat ? c.message?.content : c.text) ?? "";
        const before = told.get(c.index) ?? "";
        const rest = final.startsWith(before) ? final.slice(before.length) : "";
        if (chat) {
          const calls = (c.message?.tool_calls as Json[] | undefined)?.map((call, i) => ({ index: i, ...call }));
          const fields = { ...(rest ? { content: rest } : {}), ...(calls ? { tool_calls: calls } : {}) };
          out.push(chunk({ index: c.index, delta: delta(c.index, fields), logprobs: c.logprobs ?? null, finish_reason: c.finish_reason }));
        } else {
          out.push(chunk({ text: rest, index: c.index, logprobs: c.logprobs ?? null, finish_reason: c.finish_reason }));
        }
        told.set(c.index, final);
      }
      if (meta.includeUsage) out.push({ ...head, choices: [], usage: body.usage ?? null });
      return out;
    },
  };
}
