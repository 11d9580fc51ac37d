// docs/performance.md's chart: tokens/s against parallel sequences, one panel per model, as a hand-written SVG.
import type { ThroughputResult } from "./throughput.js";

const W = 460;
const H = 300;
const M = { left: 58, right: 26, top: 34, bottom: 44 };
const SERIES = [
  { key: "default", name: "node-llama-cpp as it batches", color: "#9aa0a6", dash: "4 3" },
  { key: "ordered", name: "+ sequence order", color: "#8ab4f8", dash: "2 2" },
  { key: "lockstep", name: "+ lockstep", color: "#1a73e8", dash: "" },
  { key: "engine", name: "project engine", color: "#e8710a", dash: "" },
] as const;

interface Point {
  x: number;
  y: number;
}

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

function niceMax(v: number): number {
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 2.5, 5, 7.5, 10].map((m) => m * p).find((c) => c >= v) ?? v;
}

function panel(r: ThroughputResult, dx: number): string {
  const by = (batching: string) =>
    r.handTuned.filter((h) => h.extra?.batching === batching).map((h) => ({ x: h.sequences!, y: h.tokensPerSecond }));
  const series: Record<string, Point[]> = {
    default: by("default"),
    ordered: by("ordered"),
    lockstep: by("lockstep"),
    engine: r.engine.map((e) => ({ x: e.sequences!, y: e.tokensPerSecond })),
  };
  const marks = [
    { p: { x: r.service.sequences!, y: r.service.tokensPerSecond }, name: "service (defaults)", color: "#188038", shape: "diamond" },
    { p: { x: 1, y: r.sequential.tokensPerSecond }, name: "one at a time", color: "#d93025", shape: "square" },
  ];
  const all = [...Object.values(series).flat(), ...marks.map((m) => m.p)];
  const xMax = Math.max(64, ...all.map((p) => p.x));
  const yMax = niceMax(Math.max(...all.map((p) => p.y)) * 1.05);
  const pw = W - M.left - M.right;
  const ph = H - M.top - M.bottom;
  const sx = (x: number) => dx + M.left + (Math.log2(x) / Math.log2(xMax)) * pw;
  const sy = (y: number) => M.top + ph - (y / yMax) * ph;
  const out: string[] = [];
  out.push(
    `<text x="${dx + W / 2}" y="18" text-anchor="middle" font-weight="bold">${esc(r.model)}: ${r.requests} requests × ${r.tokens} tokens</text>`,
  );
  for (let i = 0; i <= 4; i++) {
    const y = (yMax * i) / 4;
    out.push(`<line x1="${dx + M.left}" x2="${dx + W - M.right}" y1="${sy(y)}" y2="${sy(y)}" stroke="#e0e0e0"/>`);
    out.push(`<text x="${dx + M.left - 6}" y="${sy(y) + 4}" text-anchor="end">${Math.round(y).toLocaleString("en-US")}</text>`);
  }
  for (let x = 1; x <= xMax; x *= 2) {
    out.push(`<text x="${sx(x)}" y="${H - M.bottom + 16}" text-anchor="middle">${x}</text>`);
  }
  out.push(`<text x="${dx + M.left + pw / 2}" y="${H - 8}" text-anchor="middle">parallel sequences</text>`);
  out.push(`<text transform="translate(${dx + 14},${M.top + ph / 2}) rotate(-90)" text-anchor="middle">tokens/s</text>`);
  for (const s of SERIES) {
    const pts = [...series[s.key]].sort((a, b) => a.x - b.x);
    if (pts.length === 0) continue;
    out.push(
      `<polyline fill="none" stroke="${s.color}" stroke-width="2" stroke-dasharray="${s.dash}" points="${pts.map((p) => `${sx(p.x)},${sy(p.y)}`).join(" ")}"/>`,
    );
    for (const p of pts) out.push(`<circle cx="${sx(p.x)}" cy="${sy(p.y)}" r="3" fill="${s.color}"/>`);
  }
  for (const m of marks) {
    const [x, y] = [sx(m.p.x), sy(m.p.y)];
    out.push(
      m.shape === "diamond"
        ? `<path d="M${x},${y - 7} L${x + 7},${y} L${x},${y + 7} L${x - 7},${y} Z" fill="${m.color}"/>`
        : `<rect x="${x - 5}" y="${y - 5}" width="10" height="10" fill="${m.color}"/>`,
    );
  }
  return out.join("\n");
}

/** Legend items laid out in rows that fit `width`; returns the SVG and the height used. */
function legend(top: number, width: number): { svg: string; height: number } {
  const items = [
    ...SERIES.map((s) => ({
      name: s.name,
      svg: (x: number, y: number) =>
        `<line x1="${x}" x2="${x + 22}" y1="${y}" y2="${y}" stroke="${s.color}" stroke-width="2" stroke-dasharray="${s.dash}"/>`,
    })),
    {
      name: "service at its defaults",
      svg: (x: number, y: number) => `<path d="M${x + 11},${y - 6} L${x + 17},${y} L${x + 11},${y + 6} L${x + 5},${y} Z" fill="#188038"/>`,
    },
    {
      name: "one request at a time (project engine)",
      svg: (x: number, y: number) => `<rect x="${x + 6}" y="${y - 5}" width="10" height="10" fill="#d93025"/>`,
    },
  ];
  const out: string[] = [];
  let x = 16;
  let y = top;
  for (const it of items) {
    const w = 40 + it.name.length * 6.2;
    if (x > 16 && x + w > width) {
      x = 16;
      y += 20;
    }
    out.push(`${it.svg(x, y)}<text x="${x + 28}" y="${y + 4}">${esc(it.name)}</text>`);
    x += w;
  }
  return { svg: out.join("\n"), height: y - top + 20 };
}

export function throughputChart(results: readonly ThroughputResult[], caption: string): string {
  const width = Math.max(1, results.length) * W;
  const body = results.map((r, i) => panel(r, i * W)).join("\n");
  const keys = legend(H + 14, width);
  const height = H + keys.height + 34;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">
<rect width="100%" height="100%" fill="#ffffff"/>
${body}
${keys.svg}
<text x="16" y="${height - 10}" fill="#5f6368">${esc(caption)}</text>
</svg>
`;
}
