// Prefix routing for an upstream: how its lines should arrive so the server evaluates each shared prompt opening
// as few times as it can.
// - "slots" (llama-server): each slot keeps the KV cache of the last prompt it ran, and nothing is shared between
//   slots. Eight lines of one family sent at once make eight slots evaluate the same opening. So each family is
//   pinned to one slot (`id_slot`, with `cache_prompt`), a new family goes to the slot with the least work waiting,
//   a line waits here while its slot is busy, and the lines arrive with families taking turns ("interleave"), so
//   every slot has its family's next line at hand.
// - "grouped" (vLLM, SGLang): their prefix caches share blocks across requests, so a family's lines should run
//   side by side: the default line order ("cost") does that.
// - "none": the lines as the file has them.
// "auto" asks the server: llama-server's /props names its slots; anything else is "none".
import type { LineOrder } from "../openai/backend.js";
import { familyKey, promptOpening } from "../openai/prompt-opening.js";

export type PrefixRouting = "auto" | "slots" | "grouped" | "none";
export type ResolvedRouting = { policy: "slots"; slots: number } | { policy: "grouped" | "none" };

export const ORDER_FOR: Record<ResolvedRouting["policy"], LineOrder> = { slots: "interleave", grouped: "cost", none: "file" };

/** What llama-server's /props says about its slots; undefined for a server that does not answer so. */
export function slotsFromProps(props: unknown): number | undefined {
  const n = (props as { total_slots?: unknown } | null | undefined)?.total_slots;
  return typeof n === "number" && Number.isInteger(n) && n >= 1 ? n : undefined;
}

/** Families remembered at most; past it, families with nothing waiting or running are forgotten first. */
const MAX_FAMILIES = 4096;

interface Slot {
  running: boolean;
  waiting: Array<() => void>;
  /** Lines pinned here, waiting or running: a new family goes where this is lowest. */
  load: number;
}

/** Slot pinning by prompt family, with one line at a time per slot. */
export class SlotAffinity {
  private readonly slots: Slot[];
  private readonly families = new Map<number, number>();

  constructor(readonly count: number) {
    this.slots = Array.from({ length: count }, () => ({ running: false, waiting: [], load: 0 }));
  }

  /** The slot of the body's family (chosen now for a new family), or undefined for a prompt too short to have one. */
  slotFor(body: Record<string, unknown>): number | undefined {
    const key = familyKey(promptOpening(body));
    if (key === 0) return undefined;
    let slot = this.families.get(key);
    if (slot === undefined) {
      slot = this.leastLoaded();
      if (this.families.size >= MAX_FAMILIES) this.forgetIdle();
      this.families.set(key, slot);
    }
    return slot;
  }

  /** Waits until the slot runs nothing of ours, then holds it; `release` gives it to the next line waiting. */
  async acquire(slot: number, signal?: AbortSignal): Promise<void> {
    const s = this.slots[slot];
    s.load++;
    if (!s.running) {
      s.running = true;
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const go = () => {
        signal?.removeEventListener("abort", abort);
        resolve();
      };
      const abort = () => {
        s.waiting.splice(s.waiting.indexOf(go), 1);
        s.load--;
        reject(signal?.reason instanceof Error ? signal.reason : new Error("aborted"));
      };
      s.waiting.push(go);
      signal?.addEventListener("abort", abort, { once: true });
    });
  }

  release(slot: number): void {
    const s = this.slots[slot];
    s.load--;
    const next = s.waiting.shift();
    if (next) next();
    else s.running = false;
  }

  private leastLoaded(): number {
    let best = 0;
    for (let i = 1; i < this.slots.length; i++) if (this.slots[i].load < this.slots[best].load) best = i;
    return best;
  }

  private forgetIdle(): void {
    for (const [key, slot] of this.families) {
      if (this.slots[slot].load === 0) this.families.delete(key);
      if (this.families.size < MAX_FAMILIES / 2) return;
    }
  }
}
