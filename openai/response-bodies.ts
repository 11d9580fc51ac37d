// The body of a /v1/responses batch line (OpenAI's Responses API), field for field as openai-node's
// ResponseCreateParams types it. As for the other endpoints, a field OpenAI does not define is refused by
// name; fields it defines that this service cannot honour are refused per line in openai/responses.ts.
import { z } from "zod";
import { FunctionName, HarmlessFields, int, model, opt } from "./bodies.js";

const InputText = z.strictObject({ type: z.literal("input_text"), text: z.string() });
const OutputText = z.looseObject({ type: z.literal("output_text"), text: z.string() });
const Refusal = z.strictObject({ type: z.literal("refusal"), refusal: z.string() });
const Media = (type: string) => z.looseObject({ type: z.literal(type) });
const Part = z.discriminatedUnion(
  "type",
  [InputText, OutputText, Refusal, Media("input_image"), Media("input_file"), Media("input_audio")],
  { error: "content parts must have a type of input_text, output_text, refusal, input_image, input_file or input_audio" },
);
export type ResponseContentPart = z.infer<typeof Part>;

const status = opt(z.enum(["in_progress", "completed", "incomplete"]));

const MessageItem = z.strictObject({
  type: z.literal("message").optional(),
  role: z.enum(["user", "assistant", "system", "developer"], { error: "role must be one of user, assistant, system, developer" }),
  content: z.union([z.string(), z.array(Part)]),
  id: z.string().optional(),
  status,
});
const FunctionCallItem = z.strictObject({
  type: z.literal("function_call"),
  call_id: z.string(),
  name: z.string(),
  arguments: z.string(),
  id: z.string().optional(),
  status,
});
const FunctionCallOutputItem = z.strictObject({
  type: z.literal("function_call_output"),
  call_id: z.string(),
  output: z.union([z.string(), z.array(z.looseObject({ type: z.string() }))]),
  id: opt(z.string()),
  status,
});
/** Items of OpenAI's hosted tools and reasoning models: defined by OpenAI, so refused by name, not as unknown. */
const OtherItem = z.looseObject({
  type: z
    .string()
    .refine((t) => !["message", "function_call", "function_call_output"].includes(t), "the item does not match its type's fields"),
});
const Item = z.union([MessageItem, FunctionCallItem, FunctionCallOutputItem, OtherItem]);
export type ResponseInputItem = z.infer<typeof Item>;

const TextFormat = z.discriminatedUnion(
  "type",
  [
    z.strictObject({ type: z.literal("text") }),
    z.strictObject({ type: z.literal("json_object") }),
    z.strictObject({
      type: z.literal("json_schema"),
      name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "format.name must be 1-64 letters, digits, underscores or dashes"),
      schema: z.record(z.string(), z.unknown()),
      description: z.string().optional(),
      strict: opt(z.boolean()),
    }),
  ],
  { error: 'text.format.type must be "text", "json_object" or "json_schema"' },
);

const FunctionTool = z.strictObject({
  type: z.literal("function"),
  name: FunctionName,
  parameters: opt(z.record(z.string(), z.unknown())),
  strict: opt(z.boolean()),
  description: opt(z.string()),
});
export type ResponseFunctionTool = z.infer<typeof FunctionTool>;
const HostedTool = z.looseObject({ type: z.string().refine((t) => t !== "function", "a function tool needs name and parameters") });

const ToolChoice = z.union([
  z.enum(["none", "auto", "required"]),
  z.strictObject({ type: z.literal("function"), name: z.string() }),
  z.looseObject({ type: z.string().refine((t) => t !== "function", 'a function tool_choice is {"type": "function", "name": ...}') }),
]);

export const ResponseBodySchema = z.strictObject({
  model,
  input: z.union([z.string(), z.array(Item).min(1, "input must hold at least one item")], {
    error: "input must be a string or a list of input items",
  }),
  instructions: opt(z.string()),
  max_output_tokens: opt(int.min(1)),
  temperature: opt(z.number().min(0).max(2)),
  top_p: opt(z.number().min(0).max(1)),
  text: z.strictObject({ format: TextFormat.optional(), verbosity: opt(z.enum(["low", "medium", "high"])) }).optional(),
  tools: z.array(z.union([FunctionTool, HostedTool])).optional(),
  tool_choice: ToolChoice.optional(),
  parallel_tool_calls: opt(z.boolean()),
  top_logprobs: opt(int.min(0).max(20)),
  include: opt(z.array(z.string())),
  truncation: opt(z.enum(["auto", "disabled"])),
  max_tool_calls: opt(int.min(1)),
  background: opt(z.boolean()),
  conversation: z.unknown().optional(),
  context_management: z.unknown().optional(),
  previous_response_id: opt(z.string()),
  prompt: z.unknown().optional(),
  reasoning: z.unknown().optional(),
  moderation: z.unknown().optional(),
  prompt_cache_options: z.unknown().optional(),
  ...HarmlessFields,
});
export type ResponseBody = z.infer<typeof ResponseBodySchema>;
