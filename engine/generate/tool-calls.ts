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
  const { tools } = params;
  const answer = new ToolAnswer(model, rendered, params, run);
  if (tools.choice === "auto") {
    const ended = await answer.textUntil(syntax.trigger);
    if (ended) return ended;
  }
  for (;;) {
    const ended = await answer.call(syntax, tools);
    if (ended) return ended;
    if (!tools.parallel || typeof tools.choice === "object" || answer.calls.length >= MAX_CALLS) break;
    if (!(await answer.another(syntax))) break;
  }
  return answer.finish("tool_calls");
}

/** One answer as it grows: its tokens (the next phase's prompt), what it has spent of the budget, its calls. */
class ToolAnswer {
  readonly calls: ToolCall[] = [];
  private tokens: Token[];
  private completionTokens = 0;
  private cachedPromptTokens: number | null = null;
  private content = "";
  private readonly promptTokens: number;
  private readonly budget: number | null | undefined;
  private readonly sampling: SamplingParams;

  constructor(
    private readonly model: LlamaModel,
    private readonly rendered: RenderedChat,
    params: SamplingParams & { tools: ToolsParams },
    private readonly run: Phase,
  ) {
    const { tools: _, maxTokens, ...sampling } = params;
    this.budget = maxTokens;
    this.sampling = sampling;
    this.promptTokens = rendered.tokens.length;
    this.tokens = rendered.tokens;
  }

  /** auto: free text until the model writes the call trigger; the finished answer when it ends its turn without one. */
  async textUntil(trigger: string): Promise<GenerationResult | null> {
    const r = await this.phase({}, trigger);
    if (r.stoppedBy !== trigger) {
      this.completionTokens += r.completionTokens;
      return this.finish(r.finishReason, r.text);
    }
    this.content = r.text.trimEnd();
    if (this.content !== "") this.append(this.tokenize(this.content));
    return null;
  }

  /** One call: prefix, name, arguments, suffix. The answer, ended, when the budget cuts it; null when the call is whole. */
  async call(syntax: ToolSyntax, tools: ToolsParams): Promise<GenerationResult | null> {
    // Nothing of a call is written yet: there is none to report.
    if (!this.write(syntax.prefix)) return this.finish("length");
    let name: string;
    if (typeof tools.choice === "object") {
      name = tools.choice.name;
      // The request named the function, so the call is known even when its name does not fit the budget.
      if (!this.write(name)) return this.cut(name, "");
    } else {
      const names = tools.functions.map((f) => f.name);
      const r = await this.phase({ format: { type: "one_of", values: names } });
      name = r.text;
      this.append(this.tokenize(name));
      // The budget ran out inside the name: the name as far as it was written.
      if (!names.includes(name)) return this.cut(name, "");
    }
    if (!this.write(syntax.paramsPrefix)) return this.cut(name, "");
    const parameters = tools.functions.find((f) => f.name === name)?.parameters;
    let args = "{}";
    if (parameters) {
      // An empty schema ({}) takes any arguments object.
      const format =
        Object.keys(parameters).length === 0 ? { type: "json_object" as const } : { type: "json_schema" as const, schema: parameters };
      const r = await this.phase({ format });
      args = r.text;
      this.append(this.tokenize(args));
      // As OpenAI does, a call cut by the budget is returned with the arguments written so far.
      if (r.finishReason === "length") return this.cut(name, args);
    } else if (!this.write(args)) return this.cut(name, "");
    this.calls.push({ name, arguments: args });
    if (!this.write(syntax.suffix)) return this.finish("length");
    return null;
  }

  /** parallel: the model decides, unconstrained, whether another call follows (true, its separator written) or its turn ends. */
  async another(syntax: ToolSyntax): Promise<boolean> {
    // Room for the separator and the trigger, and a little for a model that spaces them its own way.
    const cap = LlamaText([syntax.betweenCalls, syntax.trigger]).tokenize(this.model.tokenizer).length + 4;
    const next = await this.phase({}, syntax.trigger, cap);
    if (next.stoppedBy !== syntax.trigger) {
      // The model ended its turn (or wrote text after its calls, which a tool-call answer has no place for).
      this.completionTokens += next.completionTokens;
      return false;
    }
    return this.write(syntax.betweenCalls);
  }

  finish(finishReason: FinishReason, text = this.content): GenerationResult {
    const choice: Choice = { text, completionTokens: this.completionTokens, finishReason };
    if (this.calls.length > 0) choice.toolCalls = this.calls;
    return { ...choice, promptTokens: this.promptTokens, cachedPromptTokens: this.cachedPromptTokens ?? 0, choices: [choice] };
  }

  /** As OpenAI returns a call the budget cut: what was written of it, with finish_reason length. */
  private cut(name: string, args: string): GenerationResult {
    if (name !== "") this.calls.push({ name, arguments: args });
    return this.finish("length");
  }

  private remaining() {
    return this.budget == null ? undefined : this.budget - this.completionTokens;
  }

  /** One sampled stretch of the answer; its text is added by the caller (or dropped, then counted by it). */
  private async phase(p: SamplingParams, trigger?: string, cap = Number.POSITIVE_INFINITY) {
    const maxTokens = Math.min(this.remaining() ?? cap, cap);
    const { stopStrings, stopTokens } = this.rendered;
    const stops = { stopStrings: [...stopStrings, ...(trigger ? [trigger] : [])], stopTokens };
    const r = await this.run(this.tokens, { ...this.sampling, ...p, ...(Number.isFinite(maxTokens) ? { maxTokens } : {}) }, stops);
    // A phase's prompt may hold the parts already written of the answer: only the request's own prompt counts.
    this.cachedPromptTokens ??= Math.min(r.cachedPromptTokens, this.promptTokens);
    return r;
  }

  private tokenize(text: LlamaText | string) {
    return LlamaText(text).tokenize(this.model.tokenizer);
  }

  /** Adds tokens to the answer and the prompt of the next phase. */
  private append(added: Token[]) {
    this.tokens = [...this.tokens, ...added];
    this.completionTokens += added.length;
  }

  /** Writes a fixed part for the model; false when the token budget has no room for it. */
  private write(text: LlamaText | string) {
    const added = this.tokenize(text);
    const left = this.remaining();
    if (left !== undefined && added.length > left) return false;
    this.append(added);
    return true;
  }
}
