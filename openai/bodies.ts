// The request bodies of the endpoints a batch line may target, field for field as OpenAI's API (and the
// openai-node types) define them. A field OpenAI does not define is refused (unknown_parameter); a field it
// defines is checked for OpenAI's shape and range here, and the backend then honours it or refuses it
// (InferenceBackend.check): nothing is accepted and ignored.
import { z } from "zod";

export const opt = <T extends z.ZodType>(t: T) => t.nullish();
export const int = z.number().int();

/** OpenAI allows at most 4 stop sequences. */
// An empty sequence can stop nothing: refused rather than dropped.
const stopSequence = z.string().min(1, "a stop sequence must not be empty");
const stop = opt(z.union([stopSequence, z.array(stopSequence).max(4, "stop may hold at most 4 sequences")]));
const noStream = opt(
  z.boolean().refine((v) => v === false, "stream is not supported in a batch: the whole answer is written to the output file"),
);
/** Token id (as a string, as JSON object keys are) -> a bias added to its logit. */
const logitBias = opt(
  z.record(z.string().regex(/^(0|[1-9][0-9]{0,9})$/, "logit_bias keys must be token ids"), z.number().min(-100).max(100)),
);
const metadata = opt(z.record(z.string(), z.string()));

/** Fields that change nothing about the answer; accepted and described as such in docs/api.md. */
export const HarmlessFields = {
  user: z.string().optional(),
  store: opt(z.boolean()),
  metadata,
  service_tier: opt(z.enum(["auto", "default", "flex", "scale", "priority"])),
  safety_identifier: z.string().optional(),
  prompt_cache_key: opt(z.string()),
  prompt_cache_retention: opt(z.enum(["in_memory", "24h"])),
  stream: noStream,
  stream_options: z.null({ error: "stream_options is only allowed with stream, which a batch does not support" }).optional(),
};

export const SamplingFields = {
  max_tokens: opt(int.min(1)),
  temperature: opt(z.number().min(0).max(2)),
  top_p: opt(z.number().min(0).max(1)),
  stop,
  seed: opt(int),
  frequency_penalty: opt(z.number().min(-2).max(2)),
  presence_penalty: opt(z.number().min(-2).max(2)),
  logit_bias: logitBias,
  n: opt(int.min(1).max(128)),
};

// --- /v1/chat/completions ---

const TextPart = z.strictObject({ type: z.literal("text"), text: z.string() });
const ImagePart = z.looseObject({ type: z.literal("image_url"), image_url: z.unknown() });
const AudioPart = z.looseObject({ type: z.literal("input_audio"), input_audio: z.unknown() });
const FilePart = z.looseObject({ type: z.literal("file"), file: z.unknown() });
const RefusalPart = z.strictObject({ type: z.literal("refusal"), refusal: z.string() });
const partError = { error: 'content parts must have a type of "text", "image_url", "input_audio", "file" or "refusal"' };
const UserPart = z.discriminatedUnion("type", [TextPart, ImagePart, AudioPart, FilePart], partError);
const AssistantPart = z.discriminatedUnion("type", [TextPart, RefusalPart], partError);
export type ContentPart = z.infer<typeof UserPart> | z.infer<typeof AssistantPart>;

const textContent = z.union([z.string(), z.array(TextPart)]);

export const FunctionName = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "function names must be 1-64 letters, digits, underscores or dashes");

/** An assistant message's call: a function call (arguments as JSON text) or a custom tool's. */
const ToolCallSchema = z.discriminatedUnion(
  "type",
  [
    z.strictObject({ id: z.string(), type: z.literal("function"), function: z.strictObject({ name: z.string(), arguments: z.string() }) }),
    z.strictObject({ id: z.string(), type: z.literal("custom"), custom: z.strictObject({ name: z.string(), input: z.string() }) }),
  ],
  { error: 'tool_calls[].type must be "function" or "custom"' },
);

export const FunctionDefinitionSchema = z.strictObject({
  name: FunctionName,
  description: z.string().optional(),
  parameters: z.record(z.string(), z.unknown()).optional(),
  strict: opt(z.boolean()),
});
export type FunctionDefinition = z.infer<typeof FunctionDefinitionSchema>;

const ToolSchema = z.discriminatedUnion(
  "type",
  [
    z.strictObject({ type: z.literal("function"), function: FunctionDefinitionSchema }),
    z.strictObject({ type: z.literal("custom"), custom: z.looseObject({ name: z.string() }) }),
  ],
  { error: 'tools[].type must be "function" or "custom"' },
);

const ToolChoiceSchema = z.union(
  [
    z.enum(["none", "auto", "required"]),
    z.strictObject({ type: z.literal("function"), function: z.strictObject({ name: z.string() }) }),
    z.strictObject({ type: z.literal("allowed_tools"), allowed_tools: z.looseObject({}) }),
    z.strictObject({ type: z.literal("custom"), custom: z.strictObject({ name: z.string() }) }),
  ],
  { error: 'tool_choice must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}' },
);

export const ChatMessageSchema = z.discriminatedUnion(
  "role",
  [
    z.strictObject({ role: z.literal("system"), content: textContent, name: z.string().optional() }),
    z.strictObject({ role: z.literal("developer"), content: textContent, name: z.string().optional() }),
    z.strictObject({ role: z.literal("user"), content: z.union([z.string(), z.array(UserPart)]), name: z.string().optional() }),
    // Every field of the assistant message an answer carries (openai-node's ChatCompletionMessage), so a reply is
    // sent back as it came: a client's conversation loop appends it to the messages whole.
    z.strictObject({
      role: z.literal("assistant"),
      // An assistant turn that carried only tool calls has null content.
      content: opt(z.union([z.string(), z.array(AssistantPart)])),
      refusal: opt(z.string()),
      name: z.string().optional(),
      // null as none: some servers' replies carry it so.
      tool_calls: opt(z.array(ToolCallSchema)),
      function_call: opt(z.unknown()),
      audio: opt(z.unknown()),
      // Citations of the reply's text: no parameter of OpenAI's assistant message, which takes them back and
      // ignores them, as here.
      annotations: opt(z.array(z.looseObject({ type: z.string() }))),
    }),
    z.strictObject({ role: z.literal("tool"), content: textContent, tool_call_id: z.string() }),
    z.strictObject({ role: z.literal("function"), content: opt(z.string()), name: z.string() }),
  ],
  { error: "role must be one of system, developer, user, assistant, tool, function" },
);
export type ChatMessageBody = z.infer<typeof ChatMessageSchema>;

const JsonSchemaFormat = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "json_schema.name must be 1-64 letters, digits, underscores or dashes"),
  description: z.string().optional(),
  schema: z.record(z.string(), z.unknown()).optional(),
  strict: opt(z.boolean()),
});

export const ResponseFormatSchema = z.discriminatedUnion(
  "type",
  [
    z.strictObject({ type: z.literal("text") }),
    z.strictObject({ type: z.literal("json_object") }),
    z.strictObject({ type: z.literal("json_schema"), json_schema: JsonSchemaFormat }),
  ],
  { error: 'response_format.type must be "text", "json_object" or "json_schema"' },
);
export type ResponseFormat = z.infer<typeof ResponseFormatSchema>;

export const model = opt(z.string().min(1));

export const ChatBodySchema = z
  .strictObject({
    model,
    messages: z.array(ChatMessageSchema).min(1, "messages must hold at least one message"),
    ...SamplingFields,
    ...HarmlessFields,
    max_completion_tokens: opt(int.min(1)),
    logprobs: opt(z.boolean()),
    top_logprobs: opt(int.min(0).max(20)),
    response_format: ResponseFormatSchema.optional(),
    tools: z.array(ToolSchema).optional(),
    tool_choice: ToolChoiceSchema.optional(),
    parallel_tool_calls: z.boolean().optional(),
    functions: z.array(z.unknown()).optional(),
    function_call: z.unknown().optional(),
    modalities: opt(z.array(z.enum(["text", "audio"]))),
    audio: opt(z.unknown()),
    prediction: opt(z.unknown()),
    reasoning_effort: opt(z.string()),
    verbosity: opt(z.enum(["low", "medium", "high"])),
    web_search_options: z.unknown().optional(),
    moderation: opt(z.unknown()),
    prompt_cache_options: z.unknown().optional(),
  })
  .superRefine((b, ctx) => {
    if (b.top_logprobs != null && b.logprobs !== true) {
      ctx.addIssue({ code: "custom", path: ["top_logprobs"], message: "top_logprobs requires logprobs to be true" });
    }
    // OpenAI keeps such a completion for GET /v1/chat/completions/{id}, which this service does not serve: taken and
    // dropped, the client's later retrieve would find nothing.
    if (b.store === true) {
      ctx.addIssue({
        code: "custom",
        path: ["store"],
        message: "store: true keeps a completion for retrieval, which this service does not do: send false or leave it out",
      });
    }
  });
export type ChatBody = z.infer<typeof ChatBodySchema>;

// --- /v1/completions ---

const tokenIds = z.array(int.min(0)).min(1);

export const CompletionBodySchema = z
  .strictObject({
    model,
    prompt: z.union([z.string(), z.array(z.string()).min(1), tokenIds, z.array(tokenIds).min(1)], {
      error: "prompt must be a string, an array of strings, an array of token ids or an array of token-id arrays",
    }),
    ...SamplingFields,
    // 0 is allowed: with echo it returns the prompt alone.
    max_tokens: opt(int.min(0)),
    ...HarmlessFields,
    echo: opt(z.boolean()),
    best_of: opt(int.min(1).max(20)),
    logprobs: opt(int.min(0).max(5)),
    suffix: opt(z.string()),
  })
  .superRefine((b, ctx) => {
    if (b.best_of != null && b.best_of < (b.n ?? 1)) {
      ctx.addIssue({ code: "custom", path: ["best_of"], message: "best_of must be at least n" });
    }
  });
export type CompletionBody = z.infer<typeof CompletionBodySchema>;

// --- /v1/embeddings ---

/** OpenAI's per-request bound on embedding inputs. */
export const MAX_EMBEDDING_INPUTS = 2048;

export const EmbeddingBodySchema = z.strictObject({
  model,
  input: z.union(
    [
      z.string().min(1),
      z.array(z.string().min(1)).min(1).max(MAX_EMBEDDING_INPUTS),
      tokenIds,
      z.array(tokenIds).min(1).max(MAX_EMBEDDING_INPUTS),
    ],
    { error: "input must be a non-empty string, an array of non-empty strings, or token ids" },
  ),
  encoding_format: opt(z.enum(["float", "base64"])),
  dimensions: opt(int.min(1)),
  user: z.string().optional(),
});
export type EmbeddingBody = z.infer<typeof EmbeddingBodySchema>;
