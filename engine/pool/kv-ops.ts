// Changes to a sequence's KV cells that never wait for the context's decode loop, on the patched build
// (engine/load/native.ts, docs/node-llama-cpp-patch.md). node-llama-cpp's own erase and copy take its context lock,
// which the dispatch loop holds while any sequence of the context has a decode queued, so beside generating
// sequences they waited 1.3-3 s each. The patched addon queues the change and applies it on the thread that owns
// the memory, before the next decode (or before any other change to it); the sequence's JavaScript state is
// updated here at once, as node-llama-cpp's own methods update it, so its next evaluation starts where the cells
// will be.
import type { LlamaContextSequence, Token } from "node-llama-cpp";

interface AddonContextOps {
  queueSequenceCopy(target: number, source: number, keepUpTo: number): void;
  queueSequenceRemove(sequence: number, from: number): void;
}

/** The fields of node-llama-cpp 3.22.1's LlamaContextSequence these changes keep in step (see canQueueKvOps). */
interface SequenceState {
  _sequenceId: number;
  _contextTokens: Token[];
  _nextTokenIndex: number;
  _loadedTokenPredictions: unknown[];
  _tokenPredictor?: unknown;
  _context: { _ctx: Partial<AddonContextOps> };
}

const state = (sequence: LlamaContextSequence) => sequence as unknown as SequenceState;

/**
 * Whether the sequence's context was built by the patched addon and the sequence keeps the state this file
 * updates: no token predictor, no checkpoints (a recurrent or sliding-window model's cells cannot be cut).
 */
export function canQueueKvOps(sequence: LlamaContextSequence): boolean {
  const s = state(sequence);
  const ctx = s._context?._ctx;
  return (
    typeof ctx?.queueSequenceCopy === "function" &&
    typeof ctx.queueSequenceRemove === "function" &&
    typeof s._sequenceId === "number" &&
    Array.isArray(s._contextTokens) &&
    typeof s._nextTokenIndex === "number" &&
    Array.isArray(s._loadedTokenPredictions) &&
    s._tokenPredictor == null &&
    !sequence.needsCheckpoints
  );
}

/**
 * `target` holds `donor`'s first `upTo` tokens before its next decode. The donor's cells [0, upTo) must be
 * decoded already (a prompt whose first token came, or an idle sequence), and stay so until that decode: any
 * later change to them goes through the same queue or the context lock, both of which apply this copy first.
 */
export function queueCopy(target: LlamaContextSequence, donor: LlamaContextSequence, upTo: number): void {
  const t = state(target);
  const d = state(donor);
  if (upTo > d._contextTokens.length) throw new Error(`a copy of ${upTo} tokens from a sequence holding ${d._contextTokens.length}`);
  (t._context._ctx as AddonContextOps).queueSequenceCopy(t._sequenceId, d._sequenceId, upTo);
  t._contextTokens = d._contextTokens.slice(0, upTo);
  t._nextTokenIndex = upTo;
  t._loadedTokenPredictions = [];
}

/** The sequence keeps its first `keep` tokens; the rest go before its next decode. */
export function queueTruncate(sequence: LlamaContextSequence, keep: number): void {
  const s = state(sequence);
  if (keep >= s._nextTokenIndex) return;
  (s._context._ctx as AddonContextOps).queueSequenceRemove(s._sequenceId, keep);
  s._contextTokens = s._contextTokens.slice(0, keep);
  s._nextTokenIndex = keep;
  s._loadedTokenPredictions = [];
}
