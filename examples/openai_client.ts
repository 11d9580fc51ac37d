// The official `openai` client against this service, unchanged: upload, create, poll, read results.
// Run: npx tsx examples/openai_client.ts [input.jsonl]   (BASE_URL defaults to http://localhost:8000)
import { createReadStream } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import OpenAI from "openai";

const baseURL = `${process.env.BASE_URL ?? "http://localhost:8000"}/v1`;
const client = new OpenAI({ baseURL, apiKey: process.env.OPENAI_API_KEY ?? "not-needed-when-API_KEYS-is-unset" });
const input = process.argv[2] ?? path.join(path.dirname(fileURLToPath(import.meta.url)), "sample_batch.jsonl");

const file = await client.files.create({ file: createReadStream(input), purpose: "batch" });
console.log(`uploaded ${file.filename} as ${file.id} (${file.bytes} bytes)`);

let batch = await client.batches.create({
  input_file_id: file.id,
  endpoint: "/v1/chat/completions",
  completion_window: "24h",
  metadata: { example: "openai_client.ts" },
});
console.log(`created ${batch.id}`);

const final = new Set(["completed", "failed", "expired", "cancelled"]);
while (!final.has(batch.status)) {
  await new Promise((r) => setTimeout(r, 1000));
  batch = await client.batches.retrieve(batch.id);
  const c = batch.request_counts;
  console.log(`${batch.status}: ${c?.completed ?? 0}/${c?.total ?? 0} done, ${c?.failed ?? 0} failed`);
}

if (batch.output_file_id) {
  const text = await (await client.files.content(batch.output_file_id)).text();
  for (const line of text.trim().split("\n")) {
    const row = JSON.parse(line);
    console.log(`${row.custom_id}: ${JSON.stringify(row.response.body.choices[0].message.content)}`);
  }
}

// Every batch this server has, page by page: the client's auto-pagination follows `after` cursors.
let count = 0;
for await (const b of client.batches.list({ limit: 20 })) count += b.id ? 1 : 0;
console.log(`${count} batches on the server; this one ended ${batch.status}`);
if (batch.status !== "completed") process.exit(1);
