// Sends JSON lines either as they are or wrapped in an OpenAI list object, streaming line by line
// so a large output never sits in memory.
import type { Response } from "express";
import { streamTo } from "./stream.js";

export async function sendJsonl(res: Response, lines: AsyncIterable<string>): Promise<void> {
  res.type("application/jsonl");
  await streamTo(
    res,
    (async function* () {
      for await (const line of lines) yield `${line}\n`;
    })(),
  );
}

/** {"object":"list","data":[...]} built from the lines without parsing them into one big value. */
export async function sendJsonlAsList(res: Response, lines: AsyncIterable<string>): Promise<void> {
  res.type("application/json");
  await streamTo(
    res,
    (async function* () {
      yield '{"object":"list","data":[';
      let first = true;
      for await (const line of lines) {
        yield first ? line : `,${line}`;
        first = false;
      }
      yield "]}";
    })(),
  );
}
