// What a request's prompt opens with, as both the line order (pipeline/schedule.ts) and an upstream's slot
// affinity (upstream/slot-affinity.ts) compare it: prefix families are lines whose openings hash alike.

/** What the model reads first, in the order a chat template writes it: tools, instructions, messages, the prompt. */
export function promptOpening(body: Record<string, unknown>): string {
  const prompt = body.prompt ?? body.input ?? body.query ?? body.text_1 ?? "";
  const head = [body.tools, body.instructions, body.messages].filter((v) => v !== undefined).map((v) => JSON.stringify(v));
  return head.join("") + (typeof prompt === "string" ? prompt : JSON.stringify(prompt));
}

/**
 * 32-bit FNV-1a of the first `length` UTF-16 units; 0 for a text shorter than that, so lines that end before a
 * level tie there.
 */
export function prefixHash(text: string, length: number): number {
  if (text.length < length) return 0;
  let h = 0x811c9dc5;
  for (let i = 0; i < length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** Characters two prompts must share to count as one family, and the shorter fallback for short prompts. */
export const FAMILY_CHARS = [256, 64] as const;

/** A prompt's family: the hash of its first 256 characters, else of its first 64; 0 for a shorter prompt. */
export function familyKey(opening: string): number {
  for (const length of FAMILY_CHARS) {
    const h = prefixHash(opening, length);
    if (h !== 0) return h;
  }
  return 0;
}
