import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { repoRoot } from "./repo-root.js";

/**
 * A Python that has the official `openai` package: $OBI_PYTHON, the repository's .venv (which .ci/run makes), or
 * python3; undefined when none has it (the tests that need it skip with a note).
 */
export function pythonWithOpenAI(): string | undefined {
  const candidates = [process.env.OBI_PYTHON, path.join(repoRoot, ".venv/bin/python"), "python3"].filter((p): p is string => Boolean(p));
  for (const p of candidates) {
    if (p.includes("/") && !existsSync(p)) continue;
    if (spawnSync(p, ["-c", "import openai.types.responses"], { encoding: "utf8" }).status === 0) return p;
  }
  return undefined;
}
