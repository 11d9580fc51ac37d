// A batch file whose lines name a base model and its LoRA adapters: one engine serves them all, so it is admitted
// as one batch, its lines grouped by model into a copy the batch keeps (each shard one model, each adapter's lines on
// its own contexts), the client's file untouched. Any other file goes through the admission as it is.
import { rm, writeFile } from "node:fs/promises";
import { createInterface } from "node:readline";
import type { ModelRegistry } from "../backends/registry.js";
import { InvalidRequestError } from "../domain/errors.js";
import { newBatchId } from "../domain/ids.js";
import type { Batch } from "../domain/objects.js";
import { planModelShards } from "../pipeline/shards.js";
import { inDir } from "../stores/in-dir.js";
import type { Admission, AdmitInput, ClusterBatchServiceDeps } from "./admission.js";

/** Where the grouped copy of a batch's input is kept, beside its other objects. */
const groupedKey = (id: string) => `${id}/input-by-model.jsonl`;

/**
 * Each line's model as the registry names it (undefined where it names none the registry serves), and whether the
 * line is a request that names no model at all.
 */
async function* modelsOf(deps: Pick<ClusterBatchServiceDeps, "blobs">, key: string, registry: ModelRegistry) {
  const blob = await deps.blobs.open(key);
  if (!blob) return;
  try {
    for await (const text of createInterface({ input: blob.content, crlfDelay: Number.POSITIVE_INFINITY })) {
      let body: { model?: unknown } | undefined;
      try {
        body = (JSON.parse(text) as { body?: { model?: unknown } })?.body;
      } catch {
        body = undefined;
      }
      const model = body?.model;
      // A body that is not an object (an array, say) is validation's to refuse, as for any batch.
      const unnamed = typeof body === "object" && body !== null && !Array.isArray(body) && model === undefined;
      yield { text, written: model, spec: typeof model === "string" ? registry.resolve(model) : undefined, unnamed };
    }
  } finally {
    blob.content.destroy();
  }
}

/**
 * The file's lines grouped by model, in order of first appearance, when they name several models all of one family
 * (a base and its adapters); undefined otherwise, or when a line is not a request naming a served model (validation
 * says so, as it does for one model written as its name and as an alias). A first pass keeps only the models, so a file of one model is never held in memory. Where lines name
 * a family and one names no model, there is no batch model for it to fall back on: refused, naming the line.
 */
export async function familyGroups(
  deps: Pick<ClusterBatchServiceDeps, "blobs" | "registry">,
  key: string,
): Promise<Array<{ model: string; lines: string[] }> | undefined> {
  const registry: ModelRegistry = deps.registry;
  if (!registry.models.some((m) => m.parent !== undefined)) return undefined;
  // Each model as the lines write it: one written two ways (its name and an alias) is validation's mismatched_model.
  const names = new Map<string, unknown>();
  const roots = new Set<string>();
  let line = 0;
  let unnamedLine: number | undefined;
  let unserved = false;
  for await (const { spec, unnamed, written } of modelsOf(deps, key, registry)) {
    line++;
    if (unnamed) unnamedLine ??= line;
    if (!spec) {
      unserved ||= !unnamed;
      continue;
    }
    if ((names.get(spec.name) ?? written) !== written) return undefined;
    names.set(spec.name, written);
    roots.add(spec.parent ?? spec.name);
    if (roots.size > 1) return undefined;
  }
  if (names.size < 2 || unserved) return undefined;
  if (unnamedLine !== undefined) {
    throw new InvalidRequestError(
      `Line ${unnamedLine} names no model: in a batch over a base model and its adapters (${[...names.keys()].join(", ")}) every line names its own.`,
      "missing_required_parameter",
      "body.model",
    );
  }
  const groups = new Map<string, string[]>();
  for await (const { text, spec } of modelsOf(deps, key, registry)) {
    if (!spec) return undefined;
    const group = groups.get(spec.name) ?? groups.set(spec.name, []).get(spec.name)!;
    group.push(`${text}\n`);
  }
  return [...groups].map(([model, lines]) => ({ model, lines }));
}

/**
 * Admits a batch over the file at `inputKey` (a create's, a retry's): over its lines grouped by model where they name
 * a base and its adapters, else over the file as it is. The file stays the batch's input_file_id either way.
 */
export async function admitFile(deps: ClusterBatchServiceDeps, admission: Admission, input: AdmitInput): Promise<Batch> {
  const groups = await familyGroups(deps, input.inputKey);
  return groups ? admitGrouped(deps, admission, input, groups) : admission.admit(input);
}

async function admitGrouped(
  deps: ClusterBatchServiceDeps,
  admission: Admission,
  input: AdmitInput,
  groups: Array<{ model: string; lines: string[] }>,
): Promise<Batch> {
  const id = newBatchId();
  const key = groupedKey(id);
  const local = admission.scratchFile();
  try {
    await inDir(deps.scratchDir, () => writeFile(local, groups.flatMap((g) => g.lines).join("")));
    await deps.blobs.putFile(key, local);
  } finally {
    await rm(local, { force: true });
  }
  const plan = planModelShards(groups, deps.limits.shardSize);
  try {
    return await admission.admit({ ...input, id, inputKey: key, plan, mixedModels: true });
  } catch (err) {
    // The refused batch's folder holds only this copy: it goes whole (an empty folder would read as a crash's leftover).
    await deps.blobs.deletePrefix(`${id}/`).catch(() => undefined);
    throw err;
  }
}
