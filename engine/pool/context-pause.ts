// Contexts paused for a change to one sequence's cache that takes node-llama-cpp's context lock (the prebuilt
// build's copies and cuts). The library's dispatch loop keeps that lock while any decode of the context is queued,
// so beside generating sequences such a change waited for them all to end (hundreds of tokens, seconds). Paused,
// the other sequences hold their next token: the loop ends after the decodes already queued, the change takes the
// lock within about a decode, and they go on.
import type { LlamaContext } from "node-llama-cpp";

interface Pause {
  changes: number;
  over: Promise<void>;
  resume: () => void;
}

export class ContextPauses {
  private readonly paused = new Map<LlamaContext, Pause>();

  /** Resolves when the context's sequences may queue their next token; undefined at once while it is not paused. */
  hold(context: LlamaContext): Promise<void> | undefined {
    return this.paused.get(context)?.over;
  }

  /** Runs `change` with `context` paused; pauses for changes that overlap end with the last of them. */
  async during<T>(context: LlamaContext, change: () => Promise<T>): Promise<T> {
    let pause = this.paused.get(context);
    if (!pause) {
      let resume = () => {};
      const over = new Promise<void>((r) => {
        resume = r;
      });
      pause = { changes: 0, over, resume };
      this.paused.set(context, pause);
    }
    pause.changes++;
    try {
      return await change();
    } finally {
      if (--pause.changes === 0) {
        this.paused.delete(context);
        pause.resume();
      }
    }
  }
}
