// What the requests served over chat (Responses, Anthropic's Messages) share: where each chat message came from in
// the request as written, so a refusal from the chat side names the field the client wrote.

/** For each chat message, the request's path it came from; an assistant message's tool calls each have their own. */
export type Origins = Array<{ path: string; calls: string[] }>;

/** How one request shape names what chat calls otherwise. */
export interface ParamNames {
  /** What a chat message with no origin is called: the request's whole input. */
  whole: string;
  /** A message's field past its path (`.tool_call_id`), as the request names it. */
  message(rest: string): string;
  /** A tool call's field past its path (`.function.arguments`). */
  call(rest: string): string;
  /** Fields outside the messages, the first match renamed. */
  renames: Array<[RegExp, string]>;
}

/** A chat-side parameter name as the request's own field. */
export function renamedParam(param: string | null, origins: Origins, names: ParamNames): string | null {
  if (param === null) return null;
  const m = /^messages\[(\d+)\](?:\.tool_calls\[(\d+)\])?(.*)$/.exec(param);
  if (m) {
    const origin = origins[Number(m[1])];
    if (!origin) return names.whole;
    if (m[2] !== undefined) return (origin.calls[Number(m[2])] ?? origin.path) + names.call(m[3]);
    return origin.path + names.message(m[3]);
  }
  for (const [from, to] of names.renames) if (from.test(param)) return param.replace(from, to);
  return param;
}
