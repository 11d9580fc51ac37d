// Whether a model's file is already there: a download in MODELS_DIR, the generated model in its cache.
import { stat } from "node:fs/promises";

/** True for a regular file at `file`; false where there is none, or something else (a folder, a broken link). */
export async function isFile(file: string): Promise<boolean> {
  return (await stat(file).catch(() => null))?.isFile() ?? false;
}
