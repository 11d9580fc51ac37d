import { describe, expect, it } from "vitest";
import {
  ALL_CORES_STEP_WORK,
  chooseContexts,
  chooseEmbeddingContexts,
  chooseThreads,
  GPU_FEEDER_THREADS,
  MAX_CPU_CONTEXTS,
  stepThreads,
  threadBudget,
  threadsPerContext,
  threadsText,
} from "../../engine/load/threads.js";

describe("chooseThreads", () => {
  it("uses an explicit request as is", () => {
    expect(chooseThreads({ cpuCount: 2, gpu: false, requested: 3 })).toBe(3);
    expect(chooseThreads({ cpuCount: 64, gpu: true, requested: 1 })).toBe(1);
    expect(chooseThreads({ cpuCount: 8, gpu: false, requested: 2.7 })).toBe(2);
  });

  it("leaves one core to Node on CPU, and never goes below one thread", () => {
    expect(chooseThreads({ cpuCount: 1, gpu: false, requested: 0 })).toBe(1);
    expect(chooseThreads({ cpuCount: 2, gpu: false, requested: 0 })).toBe(1);
    expect(chooseThreads({ cpuCount: 4, gpu: false, requested: 0 })).toBe(3);
    expect(chooseThreads({ cpuCount: 16, gpu: false, requested: 0 })).toBe(15);
  });

  it("feeds a GPU with a few threads", () => {
    expect(chooseThreads({ cpuCount: 2, gpu: true, requested: 0 })).toBe(1);
    expect(chooseThreads({ cpuCount: 64, gpu: true, requested: 0 })).toBe(GPU_FEEDER_THREADS);
  });

  it("treats nonsense as 'choose'", () => {
    expect(chooseThreads({ cpuCount: Number.NaN, gpu: false, requested: -1 })).toBe(1);
    expect(chooseThreads({ cpuCount: 0, gpu: false, requested: Number.NaN })).toBe(1);
  });
});

describe("threadBudget", () => {
  it("lets two single-threaded contexts compute at once where a core is spare", () => {
    expect(threadBudget(1, 2)).toBe(2);
    expect(threadBudget(1, 1)).toBe(1);
  });

  it("keeps multi-threaded contexts to their own count, so they never oversubscribe", () => {
    expect(threadBudget(3, 4)).toBe(3);
    expect(threadBudget(15, 16)).toBe(15);
    expect(threadBudget(4, 64)).toBe(4);
  });
});

describe("stepThreads", () => {
  it("gives a decode all cores once its work (parameters x tokens) reaches the threshold", () => {
    const params = ALL_CORES_STEP_WORK / 32;
    expect(stepThreads(2, 1, params, 31)).toBe(1);
    expect(stepThreads(2, 1, params, 32)).toBe(2);
    expect(stepThreads(16, 15, params, 512)).toBe(16);
  });

  it("keeps a tiny model on the spare threads however many tokens a step has", () => {
    // stories260K: 260k parameters per token; a 512-token step is still far below the threshold.
    expect(stepThreads(2, 1, 260_000, 512)).toBe(1);
  });

  it("never goes below the spare count", () => {
    expect(stepThreads(1, 1, 1e9, 64)).toBe(1);
    expect(stepThreads(2, 3, 1e9, 64)).toBe(3);
  });
});

describe("threadsText", () => {
  it("says the range when large decodes take more threads", () => {
    expect(threadsText(1)).toBe("1 thread");
    expect(threadsText(4, 4)).toBe("4 threads");
    expect(threadsText(1, 2)).toBe("1-2 threads");
  });
});

describe("chooseContexts", () => {
  it("takes two contexts per CPU core, at most MAX_CPU_CONTEXTS, one on a GPU, and what is configured", () => {
    expect(chooseContexts({ cpuCount: 1, gpu: false, requested: 0 })).toBe(2);
    expect(chooseContexts({ cpuCount: 2, gpu: false, requested: 0 })).toBe(MAX_CPU_CONTEXTS);
    expect(chooseContexts({ cpuCount: 64, gpu: false, requested: 0 })).toBe(MAX_CPU_CONTEXTS);
    expect(chooseContexts({ cpuCount: 8, gpu: true, requested: 0 })).toBe(1);
    expect(chooseContexts({ cpuCount: 2, gpu: false, requested: 3 })).toBe(3);
  });

  it("on the patched build, one context per core (copies there never wait, so fuller contexts pay), one on a GPU", () => {
    expect(chooseContexts({ cpuCount: 1, gpu: false, requested: 0, patched: true })).toBe(1);
    expect(chooseContexts({ cpuCount: 2, gpu: false, requested: 0, patched: true })).toBe(2);
    expect(chooseContexts({ cpuCount: 64, gpu: false, requested: 0, patched: true })).toBe(MAX_CPU_CONTEXTS);
    expect(chooseContexts({ cpuCount: 8, gpu: true, requested: 0, patched: true })).toBe(1);
    expect(chooseContexts({ cpuCount: 2, gpu: false, requested: 3, patched: true })).toBe(3);
  });
});

describe("threadsPerContext and chooseEmbeddingContexts", () => {
  it("shares the cores out over the contexts, never fewer than one thread", () => {
    expect(threadsPerContext(2, 4)).toBe(1);
    expect(threadsPerContext(16, 4)).toBe(4);
    expect(threadsPerContext(1, 2)).toBe(1);
  });

  it("takes as many embedding contexts as generation contexts on CPU, 2 on GPU, and what is configured", () => {
    expect(chooseEmbeddingContexts({ cpuCount: 2, gpu: false, requested: 0 })).toBe(MAX_CPU_CONTEXTS);
    expect(chooseEmbeddingContexts({ cpuCount: 1, gpu: false, requested: 0 })).toBe(2);
    expect(chooseEmbeddingContexts({ cpuCount: 8, gpu: true, requested: 0 })).toBe(2);
    expect(chooseEmbeddingContexts({ cpuCount: 2, gpu: false, requested: 1 })).toBe(1);
  });
});
