// Each measured configuration runs in a process of its own: its memory peak and threads are its own,
// and nothing one configuration leaves behind (a warm cache, a loaded model) helps the next.
import { spawn } from "node:child_process";
import path from "node:path";
import { repoRoot } from "../testkit/repo-root.js";

/** Runs `bench/<script>` with tsx and resolves with the JSON object it prints last on stdout. */
export function runChild<T>(script: string, args: Record<string, string | number | boolean>): Promise<T> {
  const argv = Object.entries(args).flatMap(([k, v]) => (v === false ? [] : v === true ? [`--${k}`] : [`--${k}`, String(v)]));
  const child = spawn(process.execPath, ["--import", "tsx", path.join(repoRoot, "bench", script), ...argv], {
    cwd: repoRoot,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (err += d));
  return new Promise((resolve, reject) => {
    child.on("exit", (code) => {
      const last = out.trim().split("\n").at(-1) ?? "";
      if (code === 0 && last.startsWith("{")) return resolve(JSON.parse(last) as T);
      reject(new Error(`bench/${script} ${argv.join(" ")} exited ${code}:\n${(err + out).slice(-3000)}`));
    });
  });
}
