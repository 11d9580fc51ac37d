// Per-test scratch directories, removed after the test file.
import { mkdtempSync, rmSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll } from "vitest";

export function scratchDir(prefix: string) {
  let dir: string | undefined;
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  let n = 0;
  return {
    /** A fresh path in the scratch directory (the file is not created). */
    async file(name = "f.jsonl"): Promise<string> {
      dir ??= await mkdtemp(path.join(tmpdir(), `${prefix}-`));
      return path.join(dir, `${n++}-${name}`);
    },
    /** A file holding `content`. */
    async write(content: string | Buffer, name?: string): Promise<string> {
      const p = await this.file(name);
      await writeFile(p, content);
      return p;
    },
  };
}

/** A directory made now and removed after the test file (call it where a hook can be declared: not inside a test). */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), `${prefix}-`));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export const jsonl = (values: unknown[]) => values.map((v) => `${JSON.stringify(v)}\n`).join("");
