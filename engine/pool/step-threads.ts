// Threads chosen per decode on CPU (threads.ts says why): the generation context may use every core, and
// before each decode llama.maxThreads, the budget node-llama-cpp's thread splitter hands out from, is set
// to what that step's work deserves. The splitter reads the budget when the decode takes its threads, right
// after the batching strategy (batch-order.ts) has planned the step and reported its size here.
import type { Llama, LlamaModel } from "node-llama-cpp";
import { stepThreads } from "../load/threads.js";

/** Weights a token is multiplied through: all tensors but the input embedding, which is only looked up. */
export function parametersPerToken(model: LlamaModel): number {
  const tensors = model.fileInfo.tensorInfo ?? [];
  const tied = !tensors.some((t) => t.name === "output.weight");
  let total = 0;
  for (const t of tensors) {
    if (t.name === "token_embd.weight" && !tied) continue;
    total += t.dimensions.reduce<number>((n, d) => n * Number(d), 1);
  }
  return total;
}

export class StepThreads {
  /** Steps decoded on all cores and on the spare ones: how often the large-step rule applied. */
  readonly stats = { allCores: 0, spare: 0 };

  constructor(
    private readonly llama: Llama,
    private readonly cores: number,
    private readonly spare: number,
    private readonly parameters: number,
    /** The budget between steps, for the embedding contexts (threads.ts: threadBudget). */
    private readonly idleBudget: number,
  ) {}

  /** The generation context's thread option: up to all cores, never fewer than one. */
  get contextThreads(): { ideal: number; min: number } {
    return { ideal: Math.max(this.cores, this.spare), min: 1 };
  }

  get maxThreads(): number {
    return Math.max(this.cores, this.spare);
  }

  step(tokens: number): void {
    const threads = stepThreads(this.cores, this.spare, this.parameters, tokens);
    if (threads > this.spare) this.stats.allCores++;
    else this.stats.spare++;
    this.llama.maxThreads = threads;
  }

  /** No generation is running: the budget goes back to what the embedding contexts share. */
  idle(): void {
    this.llama.maxThreads = this.idleBudget;
  }
}
