// @ts-check
// The live charts (uPlot: small, fast, no dependencies, served from this origin as a global).
import { $, api, el } from "./console-api.js";

/** Seconds the charts span, and between two labelled times: three or four labels whatever the chart's width. */
const WINDOW = 15 * 60;
const TICK = 5 * 60;
/** The charts drawn so far, by element id, and the pools the pool chart shows. @type {Record<string, any> & { poolsKey?: string }} */
const charts = {};

/** @param {number} t unix seconds */
const hhmm = (t) => new Date(t * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });

/**
 * Every 5 minutes on the clock within [min, max]; the labels drawn are kept on the chart's element (data-times).
 * @param {HTMLElement} box
 */
const timeAxis = (box) => ({
  space: 40,
  splits: (/** @type {any} */ _u, /** @type {number} */ _i, /** @type {number} */ min, /** @type {number} */ max) => {
    const out = [];
    for (let t = Math.ceil(min / TICK) * TICK; t <= max; t += TICK) out.push(t);
    return out;
  },
  values: (/** @type {any} */ _u, /** @type {number[]} */ splits) => {
    const labels = splits.map(hhmm);
    box.dataset.times = labels.join(" ");
    return labels;
  },
});

/** A value axis's labels, compact (11,517 reads 12K): a wide number takes no more room than the chart gives it. */
const compact = new Intl.NumberFormat(undefined, { notation: "compact", maximumFractionDigits: 1 });
/** Measures labels in the axis's own font. */
const measure = /** @type {CanvasRenderingContext2D} */ (document.createElement("canvas").getContext("2d"));

/** The widest time labels of this locale ("10:58 AM", "22:58"): what the value axis leaves room for. */
const TIME_SAMPLES = [10, 22].map((h) => hhmm(new Date(2000, 0, 1, h, 58).getTime() / 1000));

/** Tick steps of a count (batches queued, slots in use): whole numbers only, never "0.5 slots". */
const WHOLE = [1, 2, 5].flatMap((m) => [1, 10, 100, 1e3, 1e4, 1e5, 1e6].map((p) => m * p)).sort((a, b) => a - b);

/**
 * A value axis as wide as its widest label, so no label is cut at the chart's left edge, whatever the values.
 * @param {HTMLElement} box
 * @param {boolean} whole its values are counts
 */
const valueAxis = (box, whole) => ({
  ...(whole ? { incrs: WHOLE } : {}),
  values: (/** @type {any} */ _u, /** @type {number[]} */ splits) => {
    const labels = splits.map((v) => compact.format(v));
    box.dataset.values = labels.join(" ");
    return labels;
  },
  size: (/** @type {any} */ u, /** @type {string[] | null} */ labels, /** @type {number} */ i, /** @type {number} */ cycle) => {
    const axis = u.axes[i];
    // uPlot sizes its axes again until they settle: after two rounds, keep the size it has.
    if (cycle > 2 || !labels) return axis._size ?? 40;
    measure.font = axis.font[0];
    const width = (/** @type {string} */ l) => measure.measureText(l).width / devicePixelRatio;
    const widest = Math.max(0, ...labels.map(width));
    // A time label is centred on its time; the oldest may sit at the plot's left edge, half of it over this axis.
    const halfTime = Math.max(...TIME_SAMPLES.map(width)) / 2;
    return Math.ceil(Math.max(widest + axis.ticks.size + axis.gap, halfTime) + 4);
  },
});

/**
 * The chart's series named beside it, where it has several (uPlot's own legend is a table of values and dashes).
 * @param {HTMLElement} box
 * @param {Array<{ label: string; color: string }>} series
 */
function legend(box, series) {
  let list = document.getElementById(`${box.id}-legend`);
  if (!list) {
    list = el("ul", "legend");
    list.id = `${box.id}-legend`;
    box.after(list);
  }
  list.replaceChildren(
    ...series.map((s) => {
      const li = el("li", "", s.label);
      const swatch = el("span", "swatch");
      swatch.style.background = s.color;
      li.prepend(swatch);
      return li;
    }),
  );
}

/**
 * @param {string} id the chart's element
 * @param {Array<{ label: string; color: string; fill?: string }>} series
 * @param {boolean} [named] its series named in a legend (the card's title names a chart of one measure)
 * @param {boolean} [whole] its values are counts, its ticks whole numbers
 */
function chart(id, series, named = false, whole = false) {
  const box = $(id);
  const opts = {
    width: Math.max(200, box.clientWidth),
    height: 160,
    legend: { show: false },
    // Always the last 15 minutes, to the newest sample: one sample alone made uPlot span years.
    scales: {
      x: { time: true, range: (/** @type {any} */ _u, /** @type {number} */ _min, /** @type {number} */ max) => [max - WINDOW, max] },
    },
    axes: [timeAxis(box), valueAxis(box, whole)],
    series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.color, width: 2, fill: s.fill }))],
  };
  const u = new uPlot(opts, [[], ...series.map(() => [])], box);
  new ResizeObserver(() => u.setSize({ width: Math.max(200, box.clientWidth), height: 160 })).observe(box);
  if (named) legend(box, series);
  charts[id] = u;
  return u;
}

/**
 * What a chart shows, for a screen reader: its span and its newest value.
 * @param {string} id
 * @param {string} what
 * @param {number[]} t
 * @param {Array<number | null>} values
 */
function describe(id, what, t, values) {
  const last = values.at(-1);
  $(id).setAttribute(
    "aria-label",
    t.length ? `${what}, ${hhmm(t[t.length - 1] - WINDOW)} to ${hhmm(t[t.length - 1])}: now ${last ?? 0}` : `${what}: no sample yet`,
  );
}

export async function refreshSeries() {
  if (typeof uPlot === "undefined") return;
  /** @type {{ points: Array<{ t: number; tokens_per_second: number; requests_per_second: number; queue_depth: number; pools: Record<string, { in_use: number }> }> }} */
  const { points } = await api("console/api/series");
  const t = points.map((p) => p.t);
  if (!charts["chart-tokens"]) {
    chart("chart-tokens", [{ label: "tokens/s", color: "#2e90fa", fill: "rgba(46,144,250,.12)" }]);
    chart("chart-requests", [{ label: "requests/s", color: "#12b76a", fill: "rgba(18,183,106,.12)" }]);
    chart("chart-queue", [{ label: "queued", color: "#f79009" }], false, true);
  }
  for (const [id, what, values] of /** @type {Array<[string, string, number[]]>} */ ([
    ["chart-tokens", "Engine tokens per second", points.map((p) => p.tokens_per_second)],
    ["chart-requests", "Requests per second", points.map((p) => p.requests_per_second)],
    ["chart-queue", "Batches queued", points.map((p) => p.queue_depth)],
  ])) {
    charts[id].setData([t, values]);
    describe(id, what, t, values);
  }
  const pools = [...new Set(points.flatMap((p) => Object.keys(p.pools)))];
  const key = pools.join(",");
  if (charts.poolsKey !== key) {
    charts["chart-pools"]?.destroy();
    $("chart-pools").replaceChildren();
    const colors = ["#2e90fa", "#7a5af8", "#12b76a", "#f79009"];
    chart(
      "chart-pools",
      pools.map((name, i) => ({ label: name, color: colors[i % colors.length] })),
      true,
      true,
    );
    charts.poolsKey = key;
  }
  const used = pools.map((name) => points.map((p) => (p.pools[name] ? p.pools[name].in_use : null)));
  charts["chart-pools"].setData([t, ...used]);
  const now = pools.map((name, i) => `${name} ${used[i].at(-1) ?? 0}`).join(", ");
  $("chart-pools").setAttribute("aria-label", `Pool slots in use over the last 15 minutes: now ${now || "none"}`);
}
