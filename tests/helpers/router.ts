// A model router over one backend that is already up: the one-model form of the registry (every name served
// by it), for tests that drive the control plane with the file's shared engine. The router does not own the
// backend: closing a control plane never closes it.
import { ModelRegistry } from "../../backends/registry.js";
import { ModelRouter } from "../../backends/router.js";
import type { InferenceBackend } from "../../openai/backend.js";

export function routerOver(backend: InferenceBackend, name = backend.info.model): ModelRouter {
  return new ModelRouter({
    registry: new ModelRegistry([{ name, aliases: [], backend: { kind: "local", path: `${name}.gguf` } }], name),
    factory: {
      local: async () => backend,
      upstream: () => {
        throw new Error("no upstream in this test");
      },
      footprint: async () => 0,
    },
    memoryBudgetBytes: Number.POSITIVE_INFINITY,
    idleUnloadMs: 0,
    log: () => {},
  });
}
