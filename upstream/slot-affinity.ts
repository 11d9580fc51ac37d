// Prefix routing for an upstream: how its lines should arrive so the server evaluates each shared prompt opening
// as few times as it can.
// - "slots" (llama-server): each slot keeps the KV cache of the last prompt it ran, and nothing is shared between
//   slots. Eight lines of one family sent at once make eight slots evaluate the same opening. So each family is
//   pinned to the slots it holds (`id_slot`, with `cache_prompt`; SlotAffinity below), a line waits here while its
//   family's slots are busy, and the lines arrive with families dealt to the slots and taking turns ("interleave"),
//   so every slot has its family's next line at hand.
// - "grouped" (vLLM, SGLang): their prefix caches share blocks across requests, so a family's lines should run
//   side by side: the default line order ("cost") does that.
// - "none": the lines as the file has them.
// "auto" asks the server: llama-server's /props names its slots; anything else is "none".
import type { LineOrder } from "../openai/backend.js";
import { familyKey, promptOpening } from "../openai/prompt-opening.js";

export type PrefixRouting = "auto" | "slots" | "grouped" | "none";
export type ResolvedRouting = { policy: "slots"; slots: number } | { policy: "grouped" | "none" };

export const ORDER_FOR: Record<ResolvedRouting["policy"], LineOrder> = { slots: "interleave", grouped: "cost", none: "file" };

export interface Routing {
  resolved: ResolvedRouting;
  /** The slot pinning, under "slots". */
  slots?: SlotAffinity;
}

/**
 * The routing `wanted` comes to. "auto" asks each base URL's /props in turn (`probe`: undefined when it did not
 * answer); only an answer (2xx, or a 4xx such as vLLM's 404) settles it. Where none answers (down, 429, 5xx) the
 * routing is "none" for now, not settled, and the next batch asks again. Under "slots" without a count from the
 * server, `maxInFlight` stands for it; several servers behind the URLs would share slot numbers, pinned by the
 * first one's count.
 */
export async function resolveRouting(
  wanted: PrefixRouting,
  baseUrls: readonly string[],
  maxInFlight: number,
  probe: (url: string) => Promise<{ body: unknown } | undefined>,
): Promise<Routing & { settled: boolean }> {
  if (wanted === "grouped" || wanted === "none") return { resolved: { policy: wanted }, settled: true };
  let answer: { body: unknown } | undefined;
  for (const url of baseUrls) {
    answer = await probe(url);
    if (answer) break;
  }
  const reported = slotsFromProps(answer?.body);
  if (reported === undefined && wanted === "auto") return { resolved: { policy: "none" }, settled: answer !== undefined };
  const slots = reported ?? maxInFlight;
  return { resolved: { policy: "slots", slots }, slots: new SlotAffinity(slots), settled: answer !== undefined || wanted === "slots" };
}

/** What llama-server's /props says about its slots; undefined for a server that does not answer so. */
export function slotsFromProps(props: unknown): number | undefined {
  const n = (props as { total_slots?: unknown } | null | undefined)?.total_slots;
  return typeof n === "number" && Number.isInteger(n) && n >= 1 ? n : undefined;
}

interface Waiter {
  family: number;
  go: (slot: number) => void;
}

interface Slot {
  /** The family whose opening the slot's cache holds (the last it ran), if any. */
  owner: number | undefined;
  running: boolean;
  waiting: Waiter[];
}

/**
 * Slot pinning by prompt family, one line at a time per slot. A line takes a free slot of its family's; else a free
 * slot whose family has nothing left to run (its cache is of no more use); else any free slot. With none free it
 * waits: for one of its family's slots, or, for a family that holds none, for whichever slot next runs out of work
 * of its own (a shared queue, so a new family follows the family that ends first instead of queuing behind one that
 * goes on, and its later lines follow it there). A slot that frees up with nothing queued for it takes the oldest
 * line of a new family, else the first of the longest queue elsewhere, so no slot idles while lines wait. A family
 * so holds as many slots as its share of the lines in flight, and each slot evaluates a family's opening once for
 * the lines it runs.
 */
export class SlotAffinity {
  private readonly slots: Slot[];
  /** Lines of families that hold no slot, oldest first. */
  private readonly unplaced: Waiter[] = [];
  /** Lines of each family waiting or running. */
  private readonly load = new Map<number, number>();
  /** The last family of one line handed out. */
  private loners = 0;

  constructor(readonly count: number) {
    this.slots = Array.from({ length: count }, () => ({ owner: undefined, running: false, waiting: [] }));
  }

  /**
   * The body's family. A prompt too short to have one is a family of its own (a negative number no hash takes): it
   * still holds a slot and is pinned to it, for a line the server placed itself could take a slot counted free
   * here, and a line pinned there would wait for it.
   */
  familyOf(body: Record<string, unknown>): number {
    return familyKey(promptOpening(body)) || --this.loners;
  }

  /** Waits for a slot for a line of `family` and holds it; `release` gives it on. */
  async acquire(family: number, signal?: AbortSignal): Promise<number> {
    this.load.set(family, (this.load.get(family) ?? 0) + 1);
    const free = this.pick(family);
    if (free !== undefined) return this.take(free, family);
    const mine = this.slots.filter((s) => s.owner === family);
    const target = mine.length > 0 ? mine.reduce((a, b) => (b.waiting.length < a.waiting.length ? b : a)).waiting : this.unplaced;
    return new Promise<number>((resolve, reject) => {
      const waiter: Waiter = {
        family,
        go: (slot) => {
          signal?.removeEventListener("abort", abort);
          resolve(slot);
        },
      };
      const abort = () => {
        for (const queue of [this.unplaced, ...this.slots.map((s) => s.waiting)]) {
          const at = queue.indexOf(waiter);
          if (at >= 0) queue.splice(at, 1);
        }
        this.done(family);
        reject(signal?.reason instanceof Error ? signal.reason : new Error("aborted"));
      };
      target.push(waiter);
      signal?.addEventListener("abort", abort, { once: true });
    });
  }

  /** The line of `family` on `slot` is answered: the slot goes to the next line queued for it, or to one waiting elsewhere. */
  release(slot: number, family: number): void {
    this.done(family);
    const s = this.slots[slot];
    s.running = false;
    const next = s.waiting.shift() ?? this.placeOn(s) ?? this.stealFor(slot);
    if (next) next.go(this.take(slot, next.family));
  }

  private take(slot: number, family: number): number {
    const s = this.slots[slot];
    s.running = true;
    s.owner = family;
    return slot;
  }

  private done(family: number): void {
    const left = (this.load.get(family) ?? 1) - 1;
    if (left > 0) this.load.set(family, left);
    else this.load.delete(family);
  }

  /** A free slot of the family's, else a free slot whose family has nothing more to run, else any free slot. */
  private pick(family: number): number | undefined {
    let spare: number | undefined;
    let idle: number | undefined;
    for (const [i, s] of this.slots.entries()) {
      if (s.running || s.waiting.length > 0) continue;
      if (s.owner === family) return i;
      if (spare === undefined && (s.owner === undefined || !this.load.has(s.owner))) spare = i;
      idle ??= i;
    }
    return spare ?? idle;
  }

  /** For a slot out of work of its own: the oldest line of a new family; that family's other lines queue behind it. */
  private placeOn(s: Slot): Waiter | undefined {
    const first = this.unplaced.shift();
    if (!first) return undefined;
    for (let i = 0; i < this.unplaced.length; )
      if (this.unplaced[i].family === first.family) s.waiting.push(...this.unplaced.splice(i, 1));
      else i++;
    return first;
  }

  /** For an idle slot: the first line of the longest queue elsewhere. */
  private stealFor(slot: number): Waiter | undefined {
    let from: Slot | undefined;
    for (const [i, s] of this.slots.entries()) if (i !== slot && s.waiting.length > (from?.waiting.length ?? 0)) from = s;
    return from?.waiting.shift();
  }
}
