// Line charts with uPlot (bundled; its CSS too).
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

export interface Series {
  label: string;
  values: number[];
}

/** lineChart draws series over xs (unix seconds) into a new element, sized to its container. */
export function lineChart(title: string, xs: number[], series: Series[], opts: { bars?: boolean; time?: boolean } = {}): { el: HTMLElement; plot: uPlot } {
  const el = document.createElement("figure");
  el.className = "chart";
  const width = Math.max(280, Math.min(640, (document.getElementById("main")?.clientWidth ?? 640) - 24));
  const colors = ["#2563eb", "#dc2626", "#059669", "#d97706"];
  const plot = new uPlot(
    {
      title,
      width,
      height: 180,
      scales: { x: { time: opts.time !== false } },
      axes: [{}, { size: 72, values: (_u: uPlot, vals: number[]) => vals.map((v) => (v == null ? "" : String(+v.toPrecision(3)))) }],
      series: [
        {},
        ...series.map((s, i) => ({
          label: s.label,
          stroke: colors[i % colors.length],
          fill: opts.bars ? colors[i % colors.length] + "55" : undefined,
          width: 2,
          paths: opts.bars ? uPlot.paths.bars!({ size: [0.6, 40] }) : undefined,
        })),
      ],
    },
    [xs, ...series.map((s) => s.values)],
    el,
  );
  return { el, plot };
}

/** rates turns a cumulative counter into per-second rates (the first point is 0). */
export function rates(xs: number[], counter: number[]): number[] {
  return counter.map((v, i) => (i === 0 || xs[i] <= xs[i - 1] ? 0 : Math.max(0, (v - counter[i - 1]) / (xs[i] - xs[i - 1]))));
}
