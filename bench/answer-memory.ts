// What a kind of request makes the server hold: copies of one body sent at once to the real server process, its
// resident memory sampled throughout (the peak) and for a while after (what stays), beside V8's heap as /metrics
// reports it before and after, so a leak (the heap stays) and pages the allocators keep (the heap went back, the
// resident set did not) read apart. docs/reliability.md's figures for the bound on one answer come from it.
//   npx tsx bench/answer-memory.ts [--model PATH] [--concurrent 3] [--after 20] [--stream] [--endpoint E] [--body JSON]
import { parseArgs } from "node:util";
import { ensureGeneratedModel } from "../engine/load/generated-model.js";
import { startServer } from "./server.js";

const { values: a } = parseArgs({
  options: {
    model: { type: "string" },
    concurrent: { type: "string", default: "3" },
    after: { type: "string", default: "20" },
    stream: { type: "boolean", default: false },
    endpoint: { type: "string", default: "/v1/chat/completions" },
    body: {
      type: "string",
      // The request of the report that led to the bound: every value within OpenAI's ranges.
      default: JSON.stringify({
        model: "m",
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 900,
        n: 128,
        logprobs: true,
        top_logprobs: 20,
      }),
    },
  },
});

const mb = (bytes: number) => `${Math.round(bytes / 2 ** 20)} MB`;
const server = await startServer(a.model ?? (await ensureGeneratedModel()), { HTTP_IDLE_TIMEOUT_SECONDS: "3600" });
const heap = async () => {
  const text = await (await fetch(`${server.baseUrl}/metrics`)).text();
  const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? Number.NaN);
  return {
    used: value("nodejs_heap_size_used_bytes"),
    total: value("nodejs_heap_size_total_bytes"),
    external: value("nodejs_external_memory_bytes"),
  };
};
const line = (what: string, h: { used: number; total: number; external: number }) =>
  `${what}: resident ${mb(server.memory()?.rss ?? 0)}, heap used ${mb(h.used)} of ${mb(h.total)}, external ${mb(h.external)}`;

try {
  const body = { ...JSON.parse(a.body), ...(a.stream ? { stream: true } : {}) };
  console.log(line("before", await heap()));
  const started = performance.now();
  const answers = await Promise.all(
    Array.from({ length: Number(a.concurrent) }, async () => {
      const t0 = performance.now();
      const res = await fetch(`${server.baseUrl}${a.endpoint}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, bytes: Buffer.byteLength(text), seconds: (performance.now() - t0) / 1000, head: text.slice(0, 300) };
    }),
  );
  for (const x of answers)
    console.log(`answer: ${x.status}, ${mb(x.bytes)}, ${x.seconds.toFixed(1)} s${x.status === 200 ? "" : `: ${x.head}`}`);
  console.log(`all answered in ${((performance.now() - started) / 1000).toFixed(1)} s; peak resident ${mb(server.memory()?.peak ?? 0)}`);
  console.log(line("at once after", await heap()));
  await new Promise((r) => setTimeout(r, Number(a.after) * 1000));
  console.log(line(`${a.after} s after`, await heap()));
} finally {
  await server.stop();
}
