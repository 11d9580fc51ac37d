// The Messages API's request (`params` of a Message Batches request), field for field as Anthropic's API and
// @anthropic-ai/sdk define it. A field Anthropic does not define is refused (unknown_parameter); blocks and
// tools this deployment cannot serve pass the schema and are refused by name where they are translated
// (anthropic/messages.ts), so the error says why rather than "invalid type".
import { z } from "zod";

const cacheControl = z.strictObject({ type: z.literal("ephemeral"), ttl: z.enum(["5m", "1h"]).optional() }).nullish();

export const TextBlockParamSchema = z.strictObject({
  type: z.literal("text"),
  text: z.string(),
  cache_control: cacheControl,
  citations: z.array(z.unknown()).nullish(),
});

const ToolUseBlockParam = z.strictObject({
  type: z.literal("tool_use"),
  id: z.string(),
  name: z.string(),
  input: z.record(z.string(), z.unknown()),
  cache_control: cacheControl,
});

const ToolResultBlockParam = z.strictObject({
  type: z.literal("tool_result"),
  tool_use_id: z.string(),
  content: z.union([z.string(), z.array(z.looseObject({ type: z.string() }))]).optional(),
  is_error: z.boolean().optional(),
  cache_control: cacheControl,
});

/** Images, documents, thinking and server-tool blocks: valid Anthropic, refused by name where translated. */
const OtherBlock = z.looseObject({ type: z.string() });

export const ContentBlockParamSchema = z.union([TextBlockParamSchema, ToolUseBlockParam, ToolResultBlockParam, OtherBlock]);
export type ContentBlockParam = z.infer<typeof ContentBlockParamSchema>;

const MessageParam = z.strictObject({
  role: z.enum(["user", "assistant"], { error: 'role must be "user" or "assistant"' }),
  content: z.union([z.string(), z.array(ContentBlockParamSchema)]),
});
export type MessageParam = z.infer<typeof MessageParam>;

/** A client tool (`type` absent or "custom"); any other type is a server tool, refused where translated. */
const ToolSchema = z.looseObject({
  type: z.string().nullish(),
  name: z.string(),
  description: z.string().optional(),
  input_schema: z.looseObject({ type: z.literal("object") }).optional(),
  cache_control: cacheControl,
  strict: z.boolean().optional(),
});
export type AnthropicTool = z.infer<typeof ToolSchema>;

const ToolChoiceSchema = z.discriminatedUnion(
  "type",
  [
    z.strictObject({ type: z.literal("auto"), disable_parallel_tool_use: z.boolean().optional() }),
    z.strictObject({ type: z.literal("any"), disable_parallel_tool_use: z.boolean().optional() }),
    z.strictObject({ type: z.literal("tool"), name: z.string(), disable_parallel_tool_use: z.boolean().optional() }),
    z.strictObject({ type: z.literal("none") }),
  ],
  { error: 'tool_choice.type must be "auto", "any", "tool" or "none"' },
);

export const MessagesParamsSchema = z.strictObject({
  model: z.string().min(1),
  max_tokens: z.number().int().min(1),
  messages: z.array(MessageParam).min(1, "messages must hold at least one message"),
  system: z.union([z.string(), z.array(TextBlockParamSchema)]).optional(),
  stop_sequences: z.array(z.string().min(1, "a stop sequence must not be empty")).optional(),
  temperature: z.number().min(0).max(1).optional(),
  top_p: z.number().min(0).max(1).optional(),
  top_k: z.number().int().min(0).optional(),
  tools: z.array(ToolSchema).optional(),
  tool_choice: ToolChoiceSchema.optional(),
  metadata: z.strictObject({ user_id: z.string().nullish() }).optional(),
  service_tier: z.enum(["auto", "standard_only"]).optional(),
  stream: z.boolean().optional(),
  cache_control: cacheControl,
  thinking: z.looseObject({ type: z.enum(["enabled", "disabled", "adaptive"]) }).optional(),
  output_config: z
    .strictObject({
      effort: z.string().nullish(),
      format: z.strictObject({ type: z.literal("json_schema"), schema: z.record(z.string(), z.unknown()) }).nullish(),
    })
    .optional(),
  container: z.unknown().optional(),
  context_management: z.unknown().optional(),
  inference_geo: z.string().nullish(),
  mcp_servers: z.array(z.unknown()).optional(),
});
export type MessagesParams = z.infer<typeof MessagesParamsSchema>;
