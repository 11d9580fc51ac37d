// The service's name and version, as package.json states them.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export interface ServiceInfo {
  name: string;
  version: string;
}

export function readServiceInfo(): ServiceInfo {
  const file = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../package.json");
  const pkg = JSON.parse(readFileSync(file, "utf8")) as { name?: string; version?: string };
  return { name: pkg.name ?? "offline-batch-inference", version: pkg.version ?? "0.0.0" };
}
