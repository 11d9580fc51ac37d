// Seeded random bad input for every route of the Batch API: wrong types, missing and unknown fields,
// hostile ids, malformed JSON and multipart, bad JSONL. The same seed gives the same requests, so a failure
// found by the soak campaign can be replayed.

export interface FuzzRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string | FormData;
}

/** mulberry32: small, fast and reproducible. */
export function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const HOSTILE_IDS = [
  "../../etc/passwd",
  "..%2F..%2Fetc%2Fpasswd",
  "%2e%2e",
  `batch_${"9".repeat(5000)}`,
  "file-\u0000abc",
  "file-<script>",
  "batch_abc?x=1",
  " ",
  "null",
  `file-${"a".repeat(24)}`,
  `batch_${"0".repeat(32)}`,
];
const VALUES: unknown[] = [
  null,
  true,
  -1,
  0,
  1e308,
  "",
  "x".repeat(70_000),
  [],
  {},
  [1, "a"],
  { a: { b: { c: [] } } },
  "24h",
  "/v1/completions",
];

export function* fuzzRequests(n: number, seed: number): Generator<FuzzRequest> {
  const r = rng(seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)];
  const json = { "content-type": "application/json" };
  const createBody = () => {
    const body: Record<string, unknown> = { input_file_id: pick(HOSTILE_IDS), endpoint: "/v1/completions", completion_window: "24h" };
    for (const key of [
      "input_file_id",
      "endpoint",
      "completion_window",
      "metadata",
      "input",
      "output_expires_after",
      pick(["model", "__proto__", "x"]),
    ])
      if (r() < 0.4) body[key] = pick(VALUES);
    if (r() < 0.2) body.metadata = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, "v".repeat(600)]));
    if (r() < 0.3)
      body.input = Array.from({ length: 3 }, () => ({
        custom_id: pick(VALUES),
        method: pick(["POST", "GET", 7]),
        url: pick(VALUES),
        body: pick(VALUES),
      }));
    return JSON.stringify(body);
  };
  const badJsonl = () =>
    pick([
      "not json\n",
      "{}\n",
      '{"custom_id":"a","method":"POST","url":"/v1/nope","body":{}}\n',
      '{"custom_id":"a","method":"POST","url":"/v1/completions","body":{"prompt":"x"}}\n'.repeat(2),
      "\u0000\u0001\u0002",
      `${"[".repeat(10_000)}\n`,
      '{"custom_id":"a","method":"POST","url":"/v1/completions","body":"oops"}',
      "",
    ]);
  const shapes: (() => FuzzRequest)[] = [
    () => ({ method: "POST", path: "/v1/batches", headers: json, body: createBody() }),
    () => ({ method: "POST", path: "/v1/batches", headers: json, body: createBody().slice(0, Math.floor(r() * 40)) }),
    () => ({
      method: "POST",
      path: "/v1/batches",
      headers: { "content-type": pick(["text/plain", "application/xml", "multipart/form-data"]) },
      body: createBody(),
    }),
    () => ({ method: "GET", path: `/v1/batches/${encodeURIComponent(pick(HOSTILE_IDS))}`, headers: {} }),
    () => ({ method: "POST", path: `/v1/batches/${encodeURIComponent(pick(HOSTILE_IDS))}/cancel`, headers: {} }),
    () => ({ method: "GET", path: `/v1/files/${pick(HOSTILE_IDS)}/content`, headers: {} }),
    () => ({ method: "DELETE", path: `/v1/files/${encodeURIComponent(pick(HOSTILE_IDS))}`, headers: {} }),
    () => ({
      method: "GET",
      path: `/v1/batches?limit=${encodeURIComponent(String(pick(VALUES)))}&after=${encodeURIComponent(pick(HOSTILE_IDS))}`,
      headers: {},
    }),
    () => ({
      method: "GET",
      path: `/v1/files?purpose=${encodeURIComponent(String(pick(VALUES)))}&order=${pick(["asc", "up", ""])}`,
      headers: {},
    }),
    () => {
      const form = new FormData();
      if (r() < 0.8) form.append("purpose", String(pick(["batch", "fine-tune", "", "batch_output", ...VALUES.map(String)])));
      if (r() < 0.8)
        form.append(pick(["file", "files", "upload"]), new Blob([badJsonl()]), pick(["a.jsonl", "../../x.jsonl", "", "a.exe"]));
      if (r() < 0.2) form.append("expires_after[anchor]", String(pick(VALUES)));
      return { method: "POST", path: "/v1/files", headers: {}, body: form };
    },
    () => ({
      method: pick(["PUT", "PATCH", "DELETE"]),
      path: pick(["/v1/batches", "/v1/files", "/v1/batches/x/cancel"]),
      headers: json,
      body: "{}",
    }),
  ];
  for (let i = 0; i < n; i++) yield pick(shapes)();
}
