// A result cache whose stores a test holds: each put first waits for what the test gives, the rest is the store's.
import type { ResultCache } from "../../cache/port.js";

/** `inner`, with each put made only once `before()` settles. */
export function heldPuts(inner: ResultCache, before: () => Promise<void>): ResultCache {
  return {
    get: (scope, key) => inner.get(scope, key),
    put: async (scope, key, answer) => {
      await before();
      await inner.put(scope, key, answer);
    },
    purge: (scope) => inner.purge(scope),
    stats: () => inner.stats(),
    close: () => inner.close(),
  };
}
