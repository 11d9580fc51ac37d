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
  body: { model?: string; prompt: string; max_tokens: number; temperature: number };
}

export interface CompletionLineOptions {
  /** custom_ids are `${prefix}-0`, `${prefix}-1`, ...; "req" unless given. */
  prefix?: string;
  /** 8 unless given. */
  maxTokens?: number;
  /** 0 (greedy) unless given. */
  temperature?: number;
  /** Left out of the body unless given: the one-model service answers to any name. */
  model?: string;
  /** Line i's prompt; `Once upon a time, story ${prefix} ${i}:` unless given (the benches pass the workload's). */
  prompt?: (i: number) => string;
}

/** `n` /v1/completions lines: the one generator of completion lines that tests, benches and chaos share. */
export function completionLines(n: number, opts: CompletionLineOptions = {}): CompletionLine[] {
  const prefix = opts.prefix ?? "req";
  return Array.from({ length: n }, (_, i) => ({
    custom_id: `${prefix}-${i}`,
    method: "POST" as const,
    url: "/v1/completions" as const,
    body: {
      ...(opts.model ? { model: opts.model } : {}),
      prompt: opts.prompt?.(i) ?? `Once upon a time, story ${prefix} ${i}:`,
      max_tokens: opts.maxTokens ?? 8,
      temperature: opts.temperature ?? 0,
    },
  }));
}

/** Lines as a JSONL file's text, each followed by a newline. */
export const jsonl = (lines: readonly object[]): string => lines.map((l) => `${JSON.stringify(l)}\n`).join("");

/** completionLines as a file's text. */
export const completionJsonl = (n: number, opts: CompletionLineOptions = {}): string => jsonl(completionLines(n, opts));

/** The custom_ids completionLines(n, { prefix }) gives. */
export const customIds = (prefix: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

export async function writeBatchFile(path: string, lines: readonly object[]): Promise<number> {
  const text = jsonl(lines);
  await writeFile(path, text);
  return Buffer.byteLength(text);
}
