// A small tmpfs of a process's own, mounted in a user and mount namespace (`unshare -r -m`): no root, and nothing
// left mounted once the process ends. Some kernels and containers refuse those namespaces.
import { spawnSync } from "node:child_process";

/** Whether `dir` can take such a mount here; where not, `test` is warned as skipped. */
export function canMountTmpfs(dir: string, test: string): boolean {
  const ok = spawnSync("unshare", onPrivateTmpfs(dir, "1m", "true"), { stdio: "ignore" }).status === 0;
  if (!ok) console.warn(`${test}: skipped, \`unshare -r -m\` cannot mount a tmpfs here (util-linux or user namespaces missing)`);
  return ok;
}

/** `unshare`'s arguments that mount a tmpfs of `size` on `dir`, then run `command` (a shell's words) in its place. */
export function onPrivateTmpfs(dir: string, size: string, command: string): string[] {
  return ["-r", "-m", "sh", "-c", `mount -t tmpfs -o size=${size} obi "${dir}" && exec ${command}`];
}
