// Batches whose requests come in the create's body (the inline form, Anthropic's Message Batches): the lines are
// written to a file of the batch's own, grouped by model where they name several (a shard never spans two), and
// the batch is admitted over it; a refused batch leaves no file behind.
import { rm, writeFile } from "node:fs/promises";
import { servedEndpoint } from "../domain/batch-object.js";
import { parseCompletionWindow } from "../domain/completion-window.js";
import { newBatchId } from "../domain/ids.js";
import type { Batch } from "../domain/objects.js";
import type { CreateInlineBatchInput } from "../domain/ports.js";
import { planModelShards } from "../pipeline/shards.js";
import { inDir } from "../stores/in-dir.js";
import type { Admission, ClusterBatchServiceDeps } from "./admission.js";

/** The inline batch as stored (the caller shows it to the client). */
export async function createInlineBatch(
  deps: ClusterBatchServiceDeps,
  admission: Admission,
  input: CreateInlineBatchInput,
): Promise<Batch> {
  admission.checkOpen();
  servedEndpoint(input.endpoint);
  parseCompletionWindow(input.completion_window);
  const local = admission.scratchFile();
  try {
    const groups = input.mixedModels
      ? byModel(input.lines, (m) => deps.registry.resolve(m)?.name ?? m)
      : [{ model: "", lines: input.lines.map((l) => `${JSON.stringify(l)}\n`) }];
    const content = groups.flatMap((g) => g.lines).join("");
    // Lines of several models: grouped in the file, and a shard never spans two, so each runs on its own model.
    const plan = groups.length > 1 ? planModelShards(groups, deps.limits.shardSize) : undefined;
    await inDir(deps.scratchDir, () => writeFile(local, content));
    const batchId = newBatchId();
    const obj = await deps.files.adopt({ tmpPath: local, filename: inlineInputName(batchId), purpose: "batch", owner: input.owner });
    try {
      const file = await deps.files.keyOf(obj.id, input.owner);
      return await admission.admit({ ...input, id: batchId, inputFileId: obj.id, inputKey: file!.key, plan });
    } catch (err) {
      // The client sent lines, not a file: a batch refused (429, 503, a full disk) leaves no file behind.
      await deps.files.delete(obj.id, input.owner).catch(() => undefined);
      throw err;
    }
  } finally {
    await rm(local, { force: true });
  }
}

/** The file an inline batch's requests are kept in. */
export const inlineInputName = (batchId: string) => `${batchId}_input.jsonl`;

/**
 * The lines as written to the batch's file, grouped by `modelOf` their body's model in order of first appearance;
 * a line naming no model stays in the first group (it fails on its own when it runs).
 */
function byModel(lines: CreateInlineBatchInput["lines"], modelOf: (model: string) => string): Array<{ model: string; lines: string[] }> {
  const groups = new Map<string, string[]>();
  const loose: string[] = [];
  for (const l of lines) {
    const text = `${JSON.stringify(l)}\n`;
    const named = typeof l.body.model === "string" ? modelOf(l.body.model) : undefined;
    const group = named === undefined ? loose : (groups.get(named) ?? groups.set(named, []).get(named)!);
    group.push(text);
  }
  const out = [...groups].map(([model, texts]) => ({ model, lines: texts }));
  if (out.length === 0) return [{ model: "", lines: loose }];
  out[0].lines.unshift(...loose);
  return out;
}
