// A stream that runs long enough for a test to break something under it: one ordinary token all but forced (end
// tokens may not be banned), so the answer runs its whole max_tokens; begun, and read up to its third piece.
import { SPECIAL_TOKENS } from "../../engine/gguf/tokenizer.js";

/** Logit bias making the generated model's answers run their whole length. */
export const NEVER_ENDS = { [String(SPECIAL_TOKENS.imEnd.id + 42)]: 100 };

export interface Begun {
  /** Reads the stream to its end: "done", or what it threw (an error event the client raises). */
  rest(): Promise<unknown>;
  /** Pieces read so far. */
  pieces: number;
}

/** The stream's first three pieces read (the caller checks none ended it); the rest left to `rest`. */
export async function begin(stream: AsyncIterable<unknown>): Promise<Begun> {
  const it = stream[Symbol.asyncIterator]();
  const begun: Begun = {
    pieces: 0,
    rest: async () => {
      try {
        for (;;) {
          if ((await it.next()).done) return "done";
          begun.pieces++;
        }
      } catch (err) {
        return err;
      }
    },
  };
  for (let i = 0; i < 3; i++) {
    if ((await it.next()).done) throw new Error(`the stream ended after ${i} pieces, before the test could act`);
    begun.pieces++;
  }
  return begun;
}
