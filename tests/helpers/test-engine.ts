// The real engine the pipeline integration tests run on, plus a wrapper that counts calls (and those that began:
// took a sequence) and can inject transient failures in front of it (the engine itself is never replaced).
import { BATCH_WORK, type Borrower, type Engine, RequestError } from "../../engine/types.js";
import type { BackendResult, Endpoint, InferenceBackend } from "../../openai/backend.js";
import { parseRequest } from "../../parse/request.js";
import { openTestEngine } from "../../testkit/model.js";

export const testEngine = openTestEngine;

export interface Observed extends Engine {
  /** Generation/embedding calls that reached the real engine, by first argument. */
  readonly calls: string[];
  /** Those of them that began (were lent a sequence or context), once each: a call given up while it waited is not. */
  readonly begun: string[];
  /** The next `n` calls fail with a retryable error before reaching the engine. */
  failNext(n: number): void;
}

export function observe(engine: Engine): Observed {
  const calls: string[] = [];
  const begun: string[] = [];
  let failures = 0;
  const gate = (what: string) => {
    if (failures > 0) {
      failures--;
      throw new RequestError("injected transient failure", "engine_busy", true);
    }
    calls.push(what);
  };
  // The borrower the call came with (the pipeline's, told when its line begins) is still told.
  const counted = (what: string, borrower: Borrower = BATCH_WORK): Borrower => {
    let once = false;
    return {
      ...borrower,
      onBegin: () => {
        if (!once) begun.push(what);
        once = true;
        borrower.onBegin?.();
      },
    };
  };
  return {
    get info() {
      return engine.info;
    },
    calls,
    begun,
    failNext: (n) => {
      failures = n;
    },
    complete: async (prompt, params, signal, borrower) => {
      gate(String(prompt));
      return engine.complete(prompt, params, signal, counted(String(prompt), borrower));
    },
    chat: async (messages, params, signal, borrower) => {
      gate(messages.at(-1)?.content ?? "");
      return engine.chat(messages, params, signal, counted(String(messages.at(-1)?.content ?? ""), borrower));
    },
    embed: async (inputs, signal, borrower) => {
      gate(inputs[0] ?? "");
      return engine.embed(inputs, signal, counted(inputs[0] ?? "", borrower));
    },
    rank: async (pairs, param, signal, borrower) => {
      gate(pairs[0]?.[1] ?? "");
      return engine.rank(pairs, param, signal, counted(pairs[0]?.[1] ?? "", borrower));
    },
    countTokens: (text) => engine.countTokens(text),
    detokenize: (tokens) => engine.detokenize(tokens),
    get vocabularySize() {
      return engine.vocabularySize;
    },
    isEndOfGeneration: (token) => engine.isEndOfGeneration(token),
    scheduling: () => engine.scheduling(),
    prepareRun: (shape) => engine.prepareRun(shape),
    close: () => engine.close(),
  };
}

/** One line's body as the pipeline runs it on `backend`: parsed, checked, executed (a refusal rejects). */
export function runLine(backend: InferenceBackend, endpoint: Endpoint, body: unknown): Promise<BackendResult> {
  try {
    const request = parseRequest(endpoint, body);
    backend.check(request);
    return backend.execute(request);
  } catch (err) {
    return Promise.reject(err);
  }
}
