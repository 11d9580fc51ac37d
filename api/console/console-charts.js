// @ts-check
// The live charts (uPlot: small, fast, no dependencies, served from this origin as a global).
import { $, api } from "./console-api.js";

/** Seconds the charts span. */
const WINDOW = 15 * 60;
/** The charts drawn so far, by element id, and the pools the pool chart shows. @type {Record<string, any> & { poolsKey?: string }} */
const charts = {};
/**
 * @param {string} id the chart's element
 * @param {Array<{ label: string; color: string; fill?: string }>} series
 */
function chart(id, series) {
  const box = $(id);
  const opts = {
    width: Math.max(200, box.clientWidth),
    height: 160,
    legend: { show: series.length > 1 },
    // Always the last 15 minutes, to the newest sample: one sample alone made uPlot span years.
    scales: {
      x: { time: true, range: (/** @type {any} */ _u, /** @type {number} */ _min, /** @type {number} */ max) => [max - WINDOW, max] },
    },
    // Hours and minutes only, spaced so labels never meet (a full date and time overlapped at card width).
    axes: [
      {
        space: 70,
        values: (/** @type {any} */ _u, /** @type {number[]} */ splits) =>
          splits.map((v) => new Date(v * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })),
      },
      { size: 60 },
    ],
    series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.color, width: 2, fill: s.fill }))],
  };
  const u = new uPlot(opts, [[], ...series.map(() => [])], box);
  new ResizeObserver(() => u.setSize({ width: Math.max(200, box.clientWidth), height: 160 })).observe(box);
  charts[id] = u;
  return u;
}

export async function refreshSeries() {
  if (typeof uPlot === "undefined") return;
  /** @type {{ points: Array<{ t: number; tokens_per_second: number; requests_per_second: number; queue_depth: number; pools: Record<string, { in_use: number }> }> }} */
  const { points } = await api("console/api/series");
  const t = points.map((p) => p.t);
  if (!charts["chart-tokens"]) {
    chart("chart-tokens", [{ label: "tokens/s", color: "#2e90fa", fill: "rgba(46,144,250,.12)" }]);
    chart("chart-requests", [{ label: "requests/s", color: "#12b76a", fill: "rgba(18,183,106,.12)" }]);
    chart("chart-queue", [{ label: "queued", color: "#f79009" }]);
  }
  charts["chart-tokens"].setData([t, points.map((p) => p.tokens_per_second)]);
  charts["chart-requests"].setData([t, points.map((p) => p.requests_per_second)]);
  charts["chart-queue"].setData([t, points.map((p) => p.queue_depth)]);
  const pools = [...new Set(points.flatMap((p) => Object.keys(p.pools)))];
  const key = pools.join(",");
  if (charts.poolsKey !== key) {
    charts["chart-pools"]?.destroy();
    $("chart-pools").replaceChildren();
    const colors = ["#2e90fa", "#7a5af8", "#12b76a", "#f79009"];
    chart(
      "chart-pools",
      pools.map((name, i) => ({ label: name, color: colors[i % colors.length] })),
    );
    charts.poolsKey = key;
  }
  charts["chart-pools"].setData([t, ...pools.map((name) => points.map((p) => (p.pools[name] ? p.pools[name].in_use : null)))]);
}
