// The inline batch form (prompts in the create body), turned into ordinary OpenAI batch lines:
//   {"model":"...","input":[{"prompt":"What is 2+2?"},{"prompt":"Hello world"}],"max_tokens":50}
// Each item is {prompt} (-> /v1/completions), {messages} (-> chat) or
// {input} (-> embeddings). A top-level `endpoint` may pick; a {prompt} then adapts to it (a user
// message for chat, the input for embeddings). Top-level sampling fields apply to every item and
// an item may override them.
import { z } from "zod";
import { ENDPOINTS } from "../openai/backend.js";
import { ChatMessageSchema, SamplingFields } from "../openai/bodies.js";
import { MAX_CUSTOM_ID_LENGTH } from "./batch-line.js";
import type { Endpoint } from "./types.js";

const SAMPLING_KEYS = Object.keys(SamplingFields) as Array<keyof typeof SamplingFields>;

export const InlineItemSchema = z.strictObject({
  custom_id: z.string().min(1).max(MAX_CUSTOM_ID_LENGTH).optional(),
  prompt: z.string().optional(),
  messages: z.array(ChatMessageSchema).min(1, "messages must hold at least one message").optional(),
  input: z
    .union([z.string().min(1), z.array(z.string().min(1)).min(1)], {
      error: "input must be a non-empty string or array of non-empty strings",
    })
    .optional(),
  ...SamplingFields,
});
export type InlineItem = z.infer<typeof InlineItemSchema>;

export const InlineBatchBodySchema = z
  .strictObject({
    model: z.string().min(1).optional(),
    endpoint: z.enum(ENDPOINTS, { error: `endpoint must be one of ${ENDPOINTS.join(", ")}` }).optional(),
    input: z.array(InlineItemSchema, { error: "input must be an array of items" }).min(1, "input must hold at least one item"),
    ...SamplingFields,
    // Batch options the route reads itself; accepted here so one parse covers the whole body.
    completion_window: z.string().optional(),
    metadata: z.unknown().optional(),
  })
  .superRefine((body, ctx) => {
    const plan = planInline(body);
    if (!plan.ok) ctx.addIssue({ code: "custom", message: plan.message, path: plan.path });
  });
export type InlineBatchBody = z.infer<typeof InlineBatchBodySchema>;

export interface InlineLine {
  custom_id: string;
  method: "POST";
  url: Endpoint;
  body: Record<string, unknown>;
}

export class InlineBatchError extends Error {
  constructor(
    message: string,
    readonly param: string,
  ) {
    super(message);
    this.name = "InlineBatchError";
  }
}

/** Builds the OpenAI lines of a parsed inline body; throws InlineBatchError for an inconsistent one. */
export function inlineToLines(body: InlineBatchBody): { endpoint: Endpoint; model?: string; lines: InlineLine[] } {
  const plan = planInline(body);
  if (!plan.ok)
    throw new InlineBatchError(plan.message, plan.path.map((k, i) => (typeof k === "number" ? `[${k}]` : i ? `.${k}` : k)).join(""));
  const endpoint = plan.endpoint;
  const lines = body.input.map((item, i): InlineLine => {
    const b: Record<string, unknown> = {};
    if (body.model !== undefined) b.model = body.model;
    if (endpoint === "/v1/embeddings") {
      b.input = item.input ?? item.prompt;
    } else {
      if (endpoint === "/v1/completions") b.prompt = item.prompt;
      else b.messages = item.messages ?? [{ role: "user", content: item.prompt }];
      for (const k of SAMPLING_KEYS) {
        const v = item[k] ?? body[k];
        if (v != null) b[k] = v;
      }
    }
    return { custom_id: item.custom_id ?? `request-${i + 1}`, method: "POST", url: endpoint, body: b };
  });
  const out: ReturnType<typeof inlineToLines> = { endpoint, lines };
  if (body.model !== undefined) out.model = body.model;
  return out;
}

type Plan = { ok: true; endpoint: Endpoint } | { ok: false; message: string; path: Array<string | number> };

const KIND_ENDPOINT = { prompt: "/v1/completions", messages: "/v1/chat/completions", input: "/v1/embeddings" } as const;
type Kind = keyof typeof KIND_ENDPOINT;

/** Decides the one endpoint all items map to, or says which item does not fit. */
function planInline(body: Pick<InlineBatchBody, "endpoint" | "input"> & Partial<Record<(typeof SAMPLING_KEYS)[number], unknown>>): Plan {
  let endpoint: Endpoint | undefined = body.endpoint;
  let decidedBy = "the endpoint field";
  const seen = new Set<string>();
  for (const [i, item] of body.input.entries()) {
    const kinds = (Object.keys(KIND_ENDPOINT) as Kind[]).filter((k) => item[k] !== undefined);
    if (kinds.length !== 1) {
      return {
        ok: false,
        path: ["input", i],
        message: `input[${i}] must have exactly one of 'prompt', 'messages' or 'input'${kinds.length ? `, not ${kinds.map((k) => `'${k}'`).join(" and ")}` : ""}.`,
      };
    }
    const kind = kinds[0];
    const fits = (e: Endpoint) => e === KIND_ENDPOINT[kind] || (kind === "prompt" && body.endpoint !== undefined);
    if (endpoint === undefined) {
      endpoint = KIND_ENDPOINT[kind];
      decidedBy = `input[${i}]`;
    } else if (!fits(endpoint)) {
      return {
        ok: false,
        path: ["input", i, kind],
        message: `All items must map to one endpoint: input[${i}] has '${kind}' (${KIND_ENDPOINT[kind]}) but ${decidedBy} means ${endpoint}.`,
      };
    }
    const id = item.custom_id ?? `request-${i + 1}`;
    if (seen.has(id))
      return {
        ok: false,
        path: ["input", i, "custom_id"],
        message: `input[${i}] repeats the custom_id '${id}'; custom_ids must be unique.`,
      };
    seen.add(id);
  }
  if (endpoint === "/v1/embeddings") {
    const where = SAMPLING_KEYS.find((k) => body[k] != null) ?? null;
    const itemAt = body.input.findIndex((item) => SAMPLING_KEYS.some((k) => item[k] != null));
    if (where !== null || itemAt !== -1) {
      const key = where ?? SAMPLING_KEYS.find((k) => body.input[itemAt][k] != null)!;
      return { ok: false, path: where !== null ? [key] : ["input", itemAt, key], message: `'${key}' does not apply to /v1/embeddings.` };
    }
  }
  return { ok: true, endpoint: endpoint! };
}
