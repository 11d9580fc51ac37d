// A context paused for a change to a sequence's cache: its sequences hold their next token until the last of
// the overlapping changes ends, even one that fails; other contexts are not held.
import type { LlamaContext } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { ContextPauses } from "../../engine/pool/context-pause.js";

const context = () => ({}) as LlamaContext;

function deferred() {
  let settle: (ok: boolean) => void = () => {};
  const promise = new Promise<void>((resolve, reject) => {
    settle = (ok) => (ok ? resolve() : reject(new Error("the change failed")));
  });
  return { promise, settle };
}

describe("ContextPauses", () => {
  it("holds a context's sequences until the last of its overlapping changes ends", async () => {
    const pauses = new ContextPauses();
    const [a, b] = [context(), context()];
    expect(pauses.hold(a)).toBeUndefined();
    const first = deferred();
    const second = deferred();
    const runs = [pauses.during(a, () => first.promise), pauses.during(a, () => second.promise)];
    const held = pauses.hold(a);
    expect(held).toBeInstanceOf(Promise);
    expect(pauses.hold(b)).toBeUndefined();
    let resumed = false;
    void held!.then(() => {
      resumed = true;
    });
    first.settle(true);
    await runs[0];
    expect(resumed).toBe(false);
    second.settle(false);
    await expect(runs[1]).rejects.toThrow("the change failed");
    await held;
    expect(resumed).toBe(true);
    expect(pauses.hold(a)).toBeUndefined();
  });

  it("answers what the change answers", async () => {
    const pauses = new ContextPauses();
    await expect(pauses.during(context(), async () => 42)).resolves.toBe(42);
  });
});
