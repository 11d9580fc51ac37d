// A local model whose load waits for the first request that needs it. Under the result cache (cache/caching-backend.ts)
// a line answered from the store never reaches this backend, so a run whose every line is remembered loads no model.
// It says of itself what the engine said the last time it came up (backends/engine-record.ts); a request's checks,
// which need the engine, run once it is loaded, before the request does.
import { abortable } from "../cache/caching-backend.js";
import type { BackendInfo, BackendResult, ExecuteOptions, InferenceBackend, InferenceRequest, RunShape } from "../openai/backend.js";

export class LazyBackend implements InferenceBackend {
  private loading: Promise<InferenceBackend> | undefined;
  private loaded: InferenceBackend | undefined;
  /** The run's shape told before the load: given to the engine once it is up. */
  private shape: RunShape | undefined;

  /** `load` brings the engine up, or rejects (each request that needed it fails with its error). */
  constructor(
    readonly info: BackendInfo,
    private readonly load: () => Promise<InferenceBackend>,
  ) {}

  /** Whether the engine was brought up. */
  get isLoaded(): boolean {
    return this.loaded !== undefined;
  }

  check(request: InferenceRequest): void {
    this.loaded?.check(request);
  }

  async execute(request: InferenceRequest, signal?: AbortSignal, options?: ExecuteOptions): Promise<BackendResult> {
    // A request called off while the model loads (a drain, Ctrl-C) stops waiting; the load goes on for the others.
    const backend = await abortable(this.backend(), signal);
    backend.check(request);
    return backend.execute(request, signal, options);
  }

  async prepareRun(shape: RunShape): Promise<void> {
    if (this.loaded) await this.loaded.prepareRun?.(shape);
    else this.shape = shape;
  }

  preemptions(): number {
    return this.loaded?.preemptions?.() ?? 0;
  }

  async close(): Promise<void> {
    const backend = await this.loading?.catch(() => undefined);
    await backend?.close();
  }

  private backend(): Promise<InferenceBackend> {
    this.loading ??= this.load().then(async (backend) => {
      if (this.shape) await backend.prepareRun?.(this.shape);
      this.loaded = backend;
      return backend;
    });
    return this.loading;
  }
}
