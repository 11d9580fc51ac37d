// The Responses API's stream: `response.created` and `response.in_progress` (the response as it starts), the message
// item's `output_item.added` and `content_part.added`, `output_text.delta`s as the backend tells the answer, then the
// text's, part's and item's `done` events, each function call's item whole (its arguments in one delta), and
// `response.completed` (or `response.incomplete`) with the final response, as the openai clients accumulate them.
// The item ids of the events are the final response's.

import { ResponseBodySchema } from "./response-bodies.js";
import { toResponseObject } from "./responses.js";

type Json = Record<string, any>;

/** The response a request will make, before it has output: its request's fields as the final response shows them. */
export function responseSkeleton(body: unknown, model: string): Json {
  // The stream's own fields, which the route has checked: a response object has neither.
  const { stream: _, stream_options: __, ...rest } = body as Json;
  const empty = { message: { content: "" }, logprobs: null, finish_reason: "stop" };
  const none = { prompt_tokens: 0, completion_tokens: 0 };
  return toResponseObject(ResponseBodySchema.parse(rest), {
    id: "",
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [empty],
    usage: none,
  });
}

export interface ResponseEvents {
  /** `skeleton`: the response as it will be, before any output (its request's fields). */
  start(skeleton: Json): Json[];
  text(text: string): Json[];
  end(response: Json): Json[];
}

export function responseEvents(meta: { id: string; messageId: string }): ResponseEvents {
  let sequence = 0;
  let told = "";
  let opened = false;
  let next = 0;
  const ev = (type: string, fields: Json): Json => ({ type, sequence_number: sequence++, ...fields });
  const part = (text: string) => ({ type: "output_text", text, annotations: [], logprobs: [] });
  const at = { item_id: meta.messageId, output_index: 0, content_index: 0 };
  const open = (): Json[] => {
    if (opened) return [];
    opened = true;
    next = 1;
    return [
      ev("response.output_item.added", {
        output_index: 0,
        item: { id: meta.messageId, type: "message", status: "in_progress", role: "assistant", content: [] },
      }),
      ev("response.content_part.added", { ...at, part: part("") }),
    ];
  };
  const delta = (text: string) => ev("response.output_text.delta", { ...at, delta: text, logprobs: [] });

  return {
    start: (skeleton) => {
      const response = { ...skeleton, id: meta.id, status: "in_progress", completed_at: null, output: [], usage: null };
      return [ev("response.created", { response }), ev("response.in_progress", { response })];
    },
    text(text) {
      told += text;
      return [...open(), delta(text)];
    },
    end(final) {
      const output = (final.output ?? []) as Json[];
      // The message item carries the id its events announced.
      const items = output.map((item) => (item.type === "message" ? { ...item, id: meta.messageId } : item));
      const response: Json = { ...final, id: meta.id, output: items };
      const out: Json[] = [];
      for (const item of items) {
        if (item.type === "message") {
          const text: string = item.content?.[0]?.text ?? "";
          const rest = text.startsWith(told) ? text.slice(told.length) : "";
          out.push(...open(), ...(rest ? [delta(rest)] : []));
          out.push(
            ev("response.output_text.done", { ...at, text, logprobs: [] }),
            ev("response.content_part.done", { ...at, part: part(text) }),
            ev("response.output_item.done", { output_index: 0, item }),
          );
        } else if (item.type === "function_call") {
          const output_index = next++;
          out.push(
            ev("response.output_item.added", { output_index, item: { ...item, arguments: "", status: "in_progress" } }),
            ev("response.function_call_arguments.delta", { item_id: item.id, output_index, delta: item.arguments }),
            ev("response.function_call_arguments.done", { item_id: item.id, output_index, name: item.name, arguments: item.arguments }),
            ev("response.output_item.done", { output_index, item }),
          );
        }
      }
      out.push(ev(response.status === "incomplete" ? "response.incomplete" : "response.completed", { response }));
      return out;
    },
  };
}
