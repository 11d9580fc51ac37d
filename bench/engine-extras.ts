// Engine features measured on their own: shared-prefix reuse (a batch whose requests share a long system
// prompt, through the pipeline, reuse on and off) and embeddings over one and two embedding contexts.
import { runChild } from "./child.js";
import { type ChildResult, type RunRecord, toRecord } from "./records.js";

export interface PrefixResult {
  on: RunRecord;
  off: RunRecord;
  promptTokens: number;
  cachedTokensOn: number;
  cachedTokensOff: number;
  speedup: number;
}

export async function measurePrefixReuse(model: string, modelPath: string, requests: number, tokens: number): Promise<PrefixResult> {
  const run = (reuse: boolean) =>
    runChild<ChildResult>("engine-probe.ts", {
      mode: "pipeline",
      model: modelPath,
      requests,
      tokens,
      "shared-prefix": true,
      "no-prefix-reuse": !reuse,
    });
  const on = await run(true);
  const off = await run(false);
  const rec = (r: ChildResult, what: string) =>
    toRecord(model, "prefix", `shared system prompt, prefix reuse ${what}`, r, {
      promptTokens: r.promptTokens,
      cachedTokens: r.cachedTokens,
    });
  return {
    on: rec(on, "on"),
    off: rec(off, "off"),
    promptTokens: on.promptTokens,
    cachedTokensOn: on.cachedTokens ?? 0,
    cachedTokensOff: off.cachedTokens ?? 0,
    speedup: off.seconds / on.seconds,
  };
}

export interface EmbeddingsResult {
  runs: RunRecord[];
  speedup: number;
}

export async function measureEmbeddings(model: string, modelPath: string, inputs: number): Promise<EmbeddingsResult> {
  const runs: RunRecord[] = [];
  for (const contexts of [1, 2]) {
    const r = await runChild<ChildResult>("engine-probe.ts", {
      mode: "embed",
      model: modelPath,
      requests: inputs,
      "embedding-contexts": contexts,
    });
    runs.push(
      toRecord(model, "embeddings", `embeddings, ${contexts} context${contexts > 1 ? "s" : ""}`, r, {
        embeddingContexts: contexts,
        promptTokens: r.promptTokens,
      }),
    );
  }
  return { runs, speedup: runs[0].seconds / runs[1].seconds };
}
