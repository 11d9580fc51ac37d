// The requests every scenario runs, so the service, the engine and the hand-tuned script see the same prompts.
// Prompts differ from one another (no accidental prefix reuse beyond the shared opening words), like a real batch.
import { writeFile } from "node:fs/promises";

const NAMES = ["Lily", "Tom", "Ben", "Sue", "Max", "Anna", "Tim", "Mia"];

export function prompt(i: number): string {
  return `Once upon a time, there was a ${i % 2 ? "boy" : "girl"} named ${NAMES[i % 8]}. ${NAMES[(i >> 3) % 8]} had ${i} `;
}

/** A long instruction shared by every request of the prefix-reuse scenario (a few hundred tokens). */
export function sharedSystemPrompt(): string {
  const rules = [
    "You write short stories for young children.",
    "Use simple words, short sentences and a happy ending.",
    "Every story has a child, an animal and a small problem that gets solved.",
    "Never use scary words, never mention violence, and always be kind.",
  ];
  return `${Array.from({ length: 3 }, (_, i) => `Rule set ${i + 1}: ${rules.join(" ")}`).join("\n")}\n`;
}

export interface CompletionLine {
  custom_id: string;
  method: "POST";
  url: "/v1/completions";
  body: { prompt: string; max_tokens: number; temperature: number };
}

export function completionLines(count: number, maxTokens: number, prefix = ""): CompletionLine[] {
  return Array.from({ length: count }, (_, i) => ({
    custom_id: `req-${i}`,
    method: "POST" as const,
    url: "/v1/completions" as const,
    body: { prompt: prefix + prompt(i), max_tokens: maxTokens, temperature: 0 },
  }));
}

export async function writeBatchFile(path: string, lines: readonly object[]): Promise<number> {
  const text = `${lines.map((l) => JSON.stringify(l)).join("\n")}\n`;
  await writeFile(path, text);
  return Buffer.byteLength(text);
}
