// Finding a Python with the official SDKs installed, for the conformance tests that validate with pydantic.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { repoRoot } from "./repo-root.js";

/**
 * A Python that can import `module`: $OBI_PYTHON, the repository's .venv (which .ci/run makes), or python3;
 * undefined when none can (the tests that need it skip with a note).
 */
export function pythonWith(module: string): string | undefined {
  const candidates = [process.env.OBI_PYTHON, path.join(repoRoot, ".venv/bin/python"), "python3"].filter((p): p is string => Boolean(p));
  for (const p of candidates) {
    if (p.includes("/") && !existsSync(p)) continue;
    if (spawnSync(p, ["-c", `import ${module}`], { encoding: "utf8" }).status === 0) return p;
  }
  return undefined;
}

/** A Python with the official `openai` package. */
export const pythonWithOpenAI = () => pythonWith("openai.types.responses");

/** A Python with the official `anthropic` package. */
export const pythonWithAnthropic = () => pythonWith("anthropic.types.messages");
