import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { createBatch, uploadFile, waitForBatch } from "./batch-client.js";
import { cachedLlamaServer, drive, startLlamaServer } from "./llama-server.js";
import { startServer } from "./server.js";
import { completionLines, writeBatchFile } from "./workload.js";
const cpu = (pid: number) => {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) / 100;
};
const up = await startLlamaServer(cachedLlamaServer()!, "/work/shared/models/stories260K.gguf", {
  parallel: 16,
  threads: 1,
  ctxPerSlot: 256,
});
const dir = mkdtempSync(path.join(os.tmpdir(), "up-"));
const lines = completionLines(1024, 16).map((l) => ({ ...l, body: { ...l.body, model: "remote" } }));
await drive(up.baseUrl, lines.slice(0, 8), 8);
const t0 = process.cpuUsage();
const r = await drive(up.baseUrl, lines, 32);
const c = process.cpuUsage(t0);
console.log("client", r.seconds.toFixed(2), "s, client cpu", ((c.user + c.system) / 1e6).toFixed(2));
const mf = path.join(dir, "m.yaml");
writeFileSync(mf, `models:\n  - { name: remote, upstream: { base_urls: ["${up.baseUrl}/v1"], model: m${process.env.EXTRA ?? ""} } }\n`);
const input = path.join(dir, "in.jsonl");
await writeBatchFile(input, lines);
const s = await startServer("", { MODELS_FILE: mf, ...(process.env.SENV ? JSON.parse(process.env.SENV) : {}) });
await waitForBatch(s.baseUrl, (await createBatch(s.baseUrl, await uploadFile(s.baseUrl, input))).id, 25);
for (let k = 0; k < 3; k++) {
  const c0 = cpu(s.pid);
  const t1 = performance.now();
  const fid = await uploadFile(s.baseUrl, input);
  const tUp = performance.now();
  const id = (await createBatch(s.baseUrl, fid)).id;
  const tCreate = performance.now();
  let tProg = 0,
    tAll = 0,
    tDone = 0,
    marks: number[] = [];
  for (;;) {
    const b: any = await (await fetch(`${s.baseUrl}/v1/batches/${id}`)).json();
    const t = performance.now();
    if (!tProg && b.request_counts.completed > 0) tProg = t;
    for (const m of [256, 512, 768]) if (b.request_counts.completed >= m && marks.length < [256, 512, 768].indexOf(m) + 1) marks.push(t);
    if (!tAll && b.request_counts.completed >= 1024) tAll = t;
    if (b.status === "completed") {
      tDone = t;
      break;
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  const f = (x: number) => ((x - t1) / 1000).toFixed(3);
  console.log(
    "service",
    f(tDone),
    "s: upload",
    f(tUp),
    "create",
    f(tCreate),
    "first",
    f(tProg),
    "quarters",
    marks.map(f).join(" "),
    "all",
    f(tAll),
    "cpu",
    (cpu(s.pid) - c0).toFixed(2),
  );
}
const out = s.output().split("\n");
const counts = new Map<string, number>();
for (const l of out) {
  try {
    const j = JSON.parse(l);
    counts.set(j.msg, (counts.get(j.msg) ?? 0) + 1);
  } catch {}
}
console.log("log lines", out.length, [...counts].sort((a, b) => b[1] - a[1]).slice(0, 6));
await s.stop();
for (const c of [16, 32, 64]) {
  const t0 = process.cpuUsage();
  const r = await drive(up.baseUrl, lines, c);
  const u = process.cpuUsage(t0);
  console.log("client again", c, r.seconds.toFixed(2), "cpu", ((u.user + u.system) / 1e6).toFixed(2));
}
await up.stop();
process.exit(0);
