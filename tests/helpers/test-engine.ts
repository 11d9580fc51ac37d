// The real engine the pipeline integration tests run on, plus a wrapper that counts calls (and those that began:
// took a sequence) and can inject transient failures in front of it (the engine itself is never replaced).
import { beginListener, telling } from "../../engine/pool/begin.js";
import { type Engine, RequestError } from "../../engine/types.js";
import type { BackendResult, Endpoint, InferenceBackend } from "../../openai/backend.js";
import { parseRequest } from "../../requests/parse.js";
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
  // The engine's own begin listener (the pipeline's) is still told.
  const counted = <T>(what: string, work: () => Promise<T>): Promise<T> => {
    const outer = beginListener();
    let once = false;
    return telling(() => {
      if (!once) begun.push(what);
      once = true;
      outer?.();
    }, work);
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
    complete: async (prompt, params, signal) => {
      gate(String(prompt));
      return counted(String(prompt), () => engine.complete(prompt, params, signal));
    },
    chat: async (messages, params, signal) => {
      gate(messages.at(-1)?.content ?? "");
      return counted(String(messages.at(-1)?.content ?? ""), () => engine.chat(messages, params, signal));
    },
    embed: async (inputs, signal) => {
      gate(inputs[0] ?? "");
      return counted(inputs[0] ?? "", () => engine.embed(inputs, signal));
    },
    rank: async (pairs, param, signal) => {
      gate(pairs[0]?.[1] ?? "");
      return counted(pairs[0]?.[1] ?? "", () => engine.rank(pairs, param, signal));
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
