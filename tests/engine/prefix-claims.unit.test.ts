// The bookkeeping behind prefix families, without a model: who may copy from whom, and when.
import type { LlamaContextSequence, Token } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { canCopyState, commonPrefix, MIN_CHAINED_COPY_GAIN, PrefixClaims, UNKNOWN_HOLDER } from "../../engine/pool/prefix-share.js";

/** Just what the claims read of a sequence: its cache's tokens. */
function fakeSequence(cache: number[] = []) {
  const s = {
    cache,
    disposed: false,
    compareContextTokens: (tokens: Token[]) => ({ firstDifferentIndex: commonPrefix(s.cache as Token[], tokens) }),
  };
  return s as unknown as LlamaContextSequence & { cache: number[] };
}
const t = (...n: number[]) => n as Token[];
const settled = async (p: Promise<unknown> | undefined) => {
  let done = false;
  void p?.then(() => (done = true));
  await new Promise((r) => setImmediate(r));
  return done;
};

describe("PrefixClaims", () => {
  it("counts an unclaimed sequence by its cache and a claimed one by its prompt", () => {
    const claims = new PrefixClaims();
    const [idle, busy] = [fakeSequence([1, 2, 3, 9]), fakeSequence()];
    claims.claim(busy, t(1, 2, 3, 4, 5, 6), undefined);
    const donor = claims.bestDonor(t(1, 2, 3, 4, 5, 7), [idle, busy], undefined);
    expect(donor?.sequence).toBe(busy);
    expect(donor?.shared).toBe(5);
    expect(donor?.ready).toBeDefined();
  });

  it("a request waits only for prompts claimed before its own, so no two wait for each other", () => {
    const claims = new PrefixClaims();
    const [a, b] = [fakeSequence(), fakeSequence()];
    claims.claim(a, t(1, 2, 3, 4), undefined);
    claims.claim(b, t(1, 2, 3, 5), undefined);
    expect(claims.bestDonor(t(1, 2, 3, 5), [a, b], undefined, b)?.sequence).toBe(a);
    // a asks: b claimed later and has not evaluated, so it is no donor.
    expect(claims.bestDonor(t(1, 2, 3, 4), [a, b], undefined, a)).toBeUndefined();
    // Once b's prompt is evaluated it can be copied by anyone, without waiting.
    claims.evaluated(b);
    const donor = claims.bestDonor(t(1, 2, 3, 4), [a, b], undefined, a);
    expect(donor?.sequence).toBe(b);
    expect(donor?.ready).toBeUndefined();
  });

  it("a waiter is released when the donor's prompt is evaluated, or when the donor is freed or fails first", async () => {
    const claims = new PrefixClaims();
    const [a, b] = [fakeSequence(), fakeSequence()];
    claims.claim(a, t(1, 2, 3), undefined);
    const ready = claims.bestDonor(t(1, 2, 3), [a], undefined)?.ready;
    expect(await settled(ready)).toBe(false);
    claims.evaluated(a);
    expect(await settled(ready)).toBe(true);

    claims.claim(b, t(7, 8, 9), undefined);
    const dropped = claims.bestDonor(t(7, 8, 9), [b], undefined)?.ready;
    claims.drop(b);
    expect(await settled(dropped)).toBe(true);
    expect(claims.isClaimed(b)).toBe(false);
  });

  it("the memo keeps a comparison until the sequence is claimed or freed again", () => {
    const claims = new PrefixClaims();
    const s = fakeSequence([1, 2, 3]);
    const memo = new WeakMap<object, number>();
    expect(claims.bestDonor(t(1, 2, 3, 4), [s], undefined, undefined, memo)?.shared).toBe(3);
    s.cache = [1, 9];
    // Unchanged as far as the claims know (an unclaimed cache only changes once claimed): the memo answers.
    expect(claims.bestDonor(t(1, 2, 3, 4), [s], undefined, undefined, memo)?.shared).toBe(3);
    claims.claim(s, t(1, 2, 8), undefined);
    expect(claims.bestDonor(t(1, 2, 3, 4), [s], undefined, undefined, memo)?.shared).toBe(2);
    claims.drop(s);
    expect(claims.bestDonor(t(1, 2, 3, 4), [s], undefined, undefined, memo)?.shared).toBe(1);
  });

  it("skips disposed sequences and the asker itself", () => {
    const claims = new PrefixClaims();
    const [gone, me] = [fakeSequence([1, 2, 3]), fakeSequence([1, 2, 3])];
    (gone as unknown as { disposed: boolean }).disposed = true;
    claims.claim(me, t(1, 2, 3), undefined);
    expect(claims.bestDonor(t(1, 2, 3), [gone, me], undefined, me)).toBeUndefined();
  });

  it("a donor that itself waits to copy is taken only when it spares a document more, so waits do not chain", () => {
    const claims = new PrefixClaims();
    const [root, waiter, me] = [fakeSequence(), fakeSequence(), fakeSequence()];
    const opening = Array.from({ length: 10 }, (_, i) => i + 1);
    claims.claim(root, t(...opening, 100), undefined);
    claims.claim(waiter, t(...opening, 50, 51, 52), undefined);
    claims.waiting(waiter, true);
    claims.claim(me, t(...opening, 50, 51, 53), undefined);
    // The waiter shares 12 tokens, the root 10: a few words more are not worth a decode's delay.
    expect(claims.bestDonor(t(...opening, 50, 51, 53), [root, waiter, me], undefined, me)?.sequence).toBe(root);
    // Without an asker (where a family's prefix is, to choose a context) every claim counts as before.
    expect(claims.bestDonor(t(...opening, 50, 51, 53), [root, waiter], undefined)?.sequence).toBe(waiter);

    const document = Array.from({ length: MIN_CHAINED_COPY_GAIN }, (_, i) => 200 + i);
    const [reader, second] = [fakeSequence(), fakeSequence()];
    claims.claim(reader, t(...opening, ...document, 1), undefined);
    claims.waiting(reader, true);
    claims.claim(second, t(...opening, ...document, 2), undefined);
    expect(claims.bestDonor(t(...opening, ...document, 2), [root, reader, second], undefined, second)?.sequence).toBe(reader);
    // Once the waiter has its copy it goes into the next decode like any prompt, and counts as any other.
    claims.waiting(waiter, false);
    expect(claims.bestDonor(t(...opening, 50, 51, 53), [root, waiter, me], undefined, me)?.sequence).toBe(waiter);
  });

  it("a prompt sees only its own scope's prompts and caches: another key's sequence is no donor, claimed or idle", () => {
    const claims = new PrefixClaims();
    const [theirs, idle, mine] = [fakeSequence(), fakeSequence([1, 2, 3, 4]), fakeSequence()];
    claims.claim(theirs, t(1, 2, 3, 4, 5), "owner:a");
    claims.hold(idle, "owner:a");
    claims.claim(mine, t(1, 2, 3, 4, 6), "owner:b");
    expect(claims.bestDonor(t(1, 2, 3, 4, 6), [theirs, idle, mine], "owner:b", mine)).toBeUndefined();
    expect(claims.visiblePrefix(idle, t(1, 2, 3, 4, 6), "owner:b")).toBe(0);
    // The same prompts within one scope (a key's, or a cache the keys file shares) are copied as before.
    expect(claims.bestDonor(t(1, 2, 3, 4, 6), [theirs, idle], "owner:a")?.shared).toBe(4);
    expect(claims.visiblePrefix(idle, t(1, 2, 3, 4, 6), "owner:a")).toBe(4);
    // A sequence whose cache may hold anyone's tokens serves nobody.
    claims.hold(idle, UNKNOWN_HOLDER);
    expect(claims.visiblePrefix(idle, t(1, 2, 3), "owner:a")).toBe(0);
    expect(claims.visiblePrefix(idle, t(1, 2, 3), undefined)).toBe(0);
  });

  it("the capability check wants the method with its two parameters: anything else falls back", () => {
    expect(canCopyState({ _copyStateFromOtherSequence: (_a: unknown, _b: unknown) => true } as never)).toBe(true);
    expect(canCopyState({ _copyStateFromOtherSequence: (_a: unknown) => true } as never)).toBe(false);
    expect(canCopyState({} as never)).toBe(false);
  });
});
