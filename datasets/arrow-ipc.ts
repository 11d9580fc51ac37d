// Arrow IPC files (what Hugging Face's datasets library caches, stream or file format) read by apache-arrow a record
// batch at a time and written out as JSON rows with their column types, which the table adapter then reads: DuckDB
// reads no Arrow IPC without an extension it would have to download.
import { once } from "node:events";
import { createReadStream, createWriteStream } from "node:fs";
import { type DataType as ArrowType, RecordBatchReader, Type, Vector } from "apache-arrow";
import { type ColumnType, DatasetError } from "./tables.js";

function columnType(t: ArrowType): ColumnType {
  switch (t.typeId) {
    case Type.Int:
      return "integer";
    case Type.Float:
    case Type.Decimal:
      return "number";
    case Type.Utf8:
    case Type.LargeUtf8:
    case Type.Date:
    case Type.Timestamp:
      return "string";
    case Type.Bool:
      return "boolean";
    case Type.List:
    case Type.FixedSizeList: {
      const inner = columnType((t as unknown as { children: Array<{ type: ArrowType }> }).children[0].type);
      return inner === "string" || inner === "integer" || inner === "number" ? `${inner}[]` : "json";
    }
    default:
      return "json";
  }
}

/** An Arrow value as JSON: vectors as arrays, 64-bit integers as numbers where exact, dates as ISO text. */
function plain(v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if (typeof v === "bigint") return Number.isSafeInteger(Number(v)) ? Number(v) : v.toString();
  if (v instanceof Date) return v.toISOString();
  if (v instanceof Vector) return [...v].map(plain);
  if (ArrayBuffer.isView(v)) return Array.from(v as unknown as ArrayLike<number>, plain);
  if (typeof v === "object" && typeof (v as { toJSON?: unknown }).toJSON === "function")
    return plain((v as { toJSON(): unknown }).toJSON());
  if (typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  return v;
}

/** Writes `file`'s rows to `target` as JSONL; returns its columns with their types. */
export async function arrowToJsonl(file: string, target: string): Promise<Array<{ name: string; type: ColumnType }>> {
  let reader: Awaited<ReturnType<typeof RecordBatchReader.from>>;
  try {
    reader = await RecordBatchReader.from(createReadStream(file));
    await reader.open();
  } catch (err) {
    throw new DatasetError(`${file}: not an Arrow IPC file (${(err as Error).message.split("\n")[0]})`);
  }
  if (!reader.schema) throw new DatasetError(`${file}: not an Arrow IPC file (no schema)`);
  const columns = reader.schema.fields.map((f) => ({ name: f.name, type: columnType(f.type) }));
  const out = createWriteStream(target);
  let row = 0;
  try {
    for await (const batch of reader) {
      for (const r of batch) {
        row++;
        const obj = plain(r) as Record<string, unknown>;
        const line = JSON.stringify(Object.fromEntries(columns.map((c) => [c.name, obj[c.name] ?? null])));
        if (!out.write(`${line}\n`)) await once(out, "drain");
      }
    }
  } catch (err) {
    throw new DatasetError(`${file}: row ${row + 1}: ${(err as Error).message.split("\n")[0]}`);
  } finally {
    await new Promise<void>((resolve, reject) => out.end((e?: Error | null) => (e ? reject(e) : resolve())));
  }
  return columns;
}
