// Function calling on the local engine, in the chat template's own syntax (chat.ts ToolSyntax). The answer is
// generated in phases over one growing prompt, each phase a normal generation (the sequence pool's prefix
// reuse keeps the earlier tokens in the KV cache, so a phase evaluates only what the previous one added):
//   auto:     free text until the model writes the call trigger (or ends its turn without one);
//   per call: the prefix is written for the model, the name is sampled from the declared names only, the
//             arguments under the function's JSON-schema grammar, and the suffix is written for it;
//   parallel: after a call the model decides, unconstrained, whether another call follows or its turn ends.
// Writing the fixed parts instead of sampling them is what makes `required` and a named function exact.
import { type LlamaModel, LlamaText, type Token } from "node-llama-cpp";
import type { Choice, FinishReason, GenerationResult, SamplingParams, ToolCall, ToolsParams } from "../types.js";
import type { RenderedChat, ToolSyntax } from "./chat.js";

/** More calls than this in one answer is a model that loops, not a plan. */
const MAX_CALLS = 16;

export type Phase = (
  tokens: Token[],
  params: SamplingParams,
  stops: Pick<RenderedChat, "stopStrings" | "stopTokens">,
) => Promise<GenerationResult>;

export async function generateWithTools(
  model: LlamaModel,
  syntax: ToolSyntax,
  rendered: RenderedChat,
  params: SamplingParams & { tools: ToolsParams },
  run: Phase,
): Promise<GenerationResult> {
  const { tools, maxTokens: budget, ...sampling } = params;
  const promptTokens = rendered.tokens.length;
  let tokens = rendered.tokens;
  let completionTokens = 0;
  let cachedPromptTokens: number | null = null;
  const calls: ToolCall[] = [];

  const remaining = () => (budget == null ? undefined : budget - completionTokens);
  /** One sampled stretch of the answer; its text is added by the caller (or dropped, then counted by it). */
  const phase = async (p: SamplingParams, trigger?: string, cap = Number.POSITIVE_INFINITY) => {
    const maxTokens = Math.min(remaining() ?? cap, cap);
    const stops = { stopStrings: [...rendered.stopStrings, ...(trigger ? [trigger] : [])], stopTokens: rendered.stopTokens };
    const r = await run(tokens, { ...sampling, ...p, ...(Number.isFinite(maxTokens) ? { maxTokens } : {}) }, stops);
    // A phase's prompt may hold the parts already written of the answer: only the request's own prompt counts.
    cachedPromptTokens ??= Math.min(r.cachedPromptTokens, promptTokens);
    return r;
  };
  const tokenize = (text: LlamaText | string) => LlamaText(text).tokenize(model.tokenizer);
  /** Adds tokens to the answer and the prompt of the next phase. */
  const append = (added: Token[]) => {
    tokens = [...tokens, ...added];
    completionTokens += added.length;
  };
  /** Writes a fixed part for the model; false when the token budget has no room for it. */
  const write = (text: LlamaText | string) => {
    const added = tokenize(text);
    const left = remaining();
    if (left !== undefined && added.length > left) return false;
    append(added);
    return true;
  };
  const finish = (finishReason: FinishReason, text: string): GenerationResult => {
    const choice: Choice = { text, completionTokens, finishReason };
    if (calls.length > 0) choice.toolCalls = calls;
    return { ...choice, promptTokens, cachedPromptTokens: cachedPromptTokens ?? 0, choices: [choice] };
  };

  let content = "";
  if (tools.choice === "auto") {
    const r = await phase({}, syntax.trigger);
    if (r.stoppedBy !== syntax.trigger) {
      completionTokens += r.completionTokens;
      return finish(r.finishReason, r.text);
    }
    content = r.text.trimEnd();
    if (content !== "") append(tokenize(content));
  }
  const names = tools.functions.map((f) => f.name);
  /** As OpenAI returns a call the budget cut: what was written of it, with finish_reason length. */
  const cut = (name: string, args: string) => {
    if (name !== "") calls.push({ name, arguments: args });
    return finish("length", content);
  };
  for (;;) {
    // Nothing of a call is written yet: there is none to report.
    if (!write(syntax.prefix)) return finish("length", content);
    let name: string;
    if (typeof tools.choice === "object") {
      name = tools.choice.name;
      // The request named the function, so the call is known even when its name does not fit the budget.
      if (!write(name)) return cut(name, "");
    } else {
      const r = await phase({ format: { type: "one_of", values: names } });
      name = r.text;
      append(tokenize(name));
      // The budget ran out inside the name: the name as far as it was written.
      if (!names.includes(name)) return cut(name, "");
    }
    if (!write(syntax.paramsPrefix)) return cut(name, "");
    const parameters = tools.functions.find((f) => f.name === name)?.parameters;
    let args = "{}";
    if (parameters) {
      // An empty schema ({}) takes any arguments object.
      const format =
        Object.keys(parameters).length === 0 ? { type: "json_object" as const } : { type: "json_schema" as const, schema: parameters };
      const r = await phase({ format });
      args = r.text;
      append(tokenize(args));
      if (r.finishReason === "length") {
        // As OpenAI does, a call cut by the budget is returned with the arguments written so far.
        calls.push({ name, arguments: args });
        return finish("length", content);
      }
    } else if (!write(args)) return cut(name, "");
    calls.push({ name, arguments: args });
    if (!write(syntax.suffix)) return finish("length", content);
    if (!tools.parallel || typeof tools.choice === "object" || calls.length >= MAX_CALLS) break;
    // Room for the separator and the trigger, and a little for a model that spaces them its own way.
    const cap = LlamaText([syntax.betweenCalls, syntax.trigger]).tokenize(model.tokenizer).length + 4;
    const next = await phase({}, syntax.trigger, cap);
    if (next.stoppedBy !== syntax.trigger) {
      // The model ended its turn (or wrote text after its calls, which a tool-call answer has no place for).
      completionTokens += next.completionTokens;
      break;
    }
    if (!write(syntax.betweenCalls)) break;
  }
  return finish("tool_calls", content);
}
