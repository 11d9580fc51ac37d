// How much memory local models may share: the GPU's VRAM when llama.cpp finds one (models are offloaded there),
// else the machine's RAM. Probing loads llama.cpp's bindings once and lets them go again.
import os from "node:os";
import type { EngineOptions } from "../types.js";

export interface DeviceMemory {
  kind: "vram" | "ram";
  bytes: number;
}

/**
 * The RAM this process may use: the machine's, or its cgroup's limit where that is lower. In a container
 * os.totalmem() reports the node's memory, and a budget taken from it would run the pod into its OOM kill.
 */
export function usableRam(): number {
  const limit = process.constrainedMemory?.() ?? 0;
  return limit > 0 ? Math.min(limit, os.totalmem()) : os.totalmem();
}

export async function deviceMemory(gpu: EngineOptions["gpu"]): Promise<DeviceMemory> {
  if (gpu !== false) {
    try {
      // Imported here, not with the file: usableRam is wanted where node-llama-cpp need not be loaded at all.
      const { getLlama, LlamaLogLevel } = await import("node-llama-cpp");
      const llama = await getLlama({ build: "never", skipDownload: true, gpu, logLevel: LlamaLogLevel.error, progressLogs: false });
      try {
        if (llama.gpu !== false) return { kind: "vram", bytes: (await llama.getVramState()).total };
      } finally {
        await llama.dispose();
      }
    } catch {
      // No usable GPU backend: the models run on the CPU, in RAM.
    }
  }
  return { kind: "ram", bytes: usableRam() };
}
