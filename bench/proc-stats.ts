// Resident memory of a process from /proc (Linux): what the kernel charges, model mapping included.

import { readFileSync } from "node:fs";

export interface MemorySample {
  /** Resident set now, bytes. */
  rss: number;
  /** Peak resident set since the process started (VmHWM), bytes. */
  peak: number;
}

/** Undefined where /proc is missing (not Linux) or the process is gone. */
export function readMemory(pid: number | "self" = "self"): MemorySample | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/status`, "utf8");
  } catch {
    return undefined;
  }
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? NaN) * 1024;
  return { rss: kb("VmRSS"), peak: kb("VmHWM") };
}

export function cpuModel(): string {
  try {
    const m = /^model name\s*:\s*(.+)$/m.exec(readFileSync("/proc/cpuinfo", "utf8"));
    return m ? m[1].trim() : "unknown";
  } catch {
    return "unknown";
  }
}
