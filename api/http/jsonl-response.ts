// Sends a JSONL file either as it is or wrapped in an OpenAI list object, streaming line by line
// so a large output never sits in memory.
import type { Response } from "express";
import { readJsonlLines } from "../../pipeline/jsonl.js";
import { streamTo } from "./stream.js";

/**
 * The complete JSON lines of a file. While a batch runs, the worker may be halfway through
 * appending its last line; a line that does not parse is that torn tail and is left for next time.
 */
async function* completeLines(path: string): AsyncGenerator<string> {
  for await (const line of readJsonlLines(path)) {
    if (line.text.trim() === "") continue;
    try {
      JSON.parse(line.text);
    } catch {
      continue;
    }
    yield line.text;
  }
}

export async function sendJsonl(res: Response, path: string): Promise<void> {
  res.type("application/jsonl");
  await streamTo(
    res,
    (async function* () {
      for await (const line of completeLines(path)) yield `${line}\n`;
    })(),
  );
}

/** {"object":"list","data":[...]} built from the lines without parsing them into one big value. */
export async function sendJsonlAsList(res: Response, path: string): Promise<void> {
  res.type("application/json");
  await streamTo(
    res,
    (async function* () {
      yield '{"object":"list","data":[';
      let first = true;
      for await (const line of completeLines(path)) {
        yield first ? line : `,${line}`;
        first = false;
      }
      yield "]}";
    })(),
  );
}
