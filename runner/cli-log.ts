// The runner's logger: the same pino calls as the server (so shared code logs the same way), printed
// as short human lines on stderr, with warnings made loud. LOG_FORMAT=json keeps pino's JSON lines.
import pino from "pino";

const LABELS: Record<number, string> = { 10: "trace", 20: "debug", 30: "info", 40: "WARNING", 50: "ERROR", 60: "FATAL" };

export function createCliLogger(opts: { level: string; json?: boolean; stderr?: { write(text: string): unknown } }): pino.Logger {
  const stderr = opts.stderr ?? process.stderr;
  if (opts.json) return pino({ level: opts.level, base: { service: "offline-batch-inference", component: "runner" } }, pino.destination(2));
  return pino(
    { level: opts.level, base: undefined, timestamp: false },
    {
      write(line: string) {
        // A `level` field in a log call's fields (llama.cpp's own level) shadows pino's number.
        const { level, msg } = JSON.parse(line) as { level: number | string; msg?: string };
        stderr.write(`${typeof level === "number" ? (LABELS[level] ?? "log") : "info"}: ${msg ?? ""}\n`);
      },
    },
  );
}
