// Usage: cost and CPU per day (GET /v1/usage per day) and per template
// (the kept sandboxes' metrics), plotted, with a CSV download.
import { call, sbPath, type Sandbox, type Metrics } from "../api";
import { el, append, button, fmtCost } from "../dom";
import { lineChart } from "../chart";
import type { Usage } from "../../../../../sdk/typescript/src/types.gen.js";

/** maxSandboxes bounds the metrics calls of the per-template table. */
const maxSandboxes = 200;

/** csvField quotes a field (and defuses spreadsheet formulas). */
export function csvField(v: string | number): string {
  let s = String(v);
  if (/^[=+\-@\t\r]/.test(s)) s = "'" + s;
  return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export async function usagePage(main: HTMLElement): Promise<null> {
  const days = 7;
  const today = new Date();
  today.setUTCHours(0, 0, 0, 0);
  const windows = Array.from({ length: days }, (_, i) => {
    const from = new Date(today.getTime() - (days - 1 - i) * 86400e3);
    return { from, to: new Date(from.getTime() + 86400e3) };
  });
  const perDay = await Promise.all(
    windows.map((w) => call<Usage>("GET", `/usage?from=${encodeURIComponent(w.from.toISOString().replace(/\.\d+Z$/, "Z"))}&to=${encodeURIComponent(w.to.toISOString().replace(/\.\d+Z$/, "Z"))}`)),
  );
  const xs = windows.map((w) => w.from.getTime() / 1000);

  const { sandboxes } = await call<{ sandboxes: Sandbox[] }>("GET", "/sandboxes?state=all&limit=" + maxSandboxes);
  const byTemplate = new Map<string, { sandboxes: number; cpu: number; cost: number }>();
  await Promise.all(
    (sandboxes ?? []).map(async (sb) => {
      const m = await call<Metrics>("GET", sbPath(sb.id, "metrics")).catch(() => null);
      const t = byTemplate.get(sb.template) ?? { sandboxes: 0, cpu: 0, cost: 0 };
      t.sandboxes++;
      t.cpu += m?.cpu_seconds ?? 0;
      t.cost += m?.cost_micros ?? 0;
      byTemplate.set(sb.template, t);
    }),
  );
  const templates = [...byTemplate.entries()].sort((a, b) => b[1].cost - a[1].cost);

  const csv = () => {
    const lines = [["kind", "key", "sandboxes", "cpu_seconds", "cost_micros"].join(",")];
    perDay.forEach((u, i) => lines.push(["day", windows[i].from.toISOString().slice(0, 10), u.sandboxes, u.cpu_seconds.toFixed(3), u.cost_micros].map(csvField).join(",")));
    for (const [name, t] of templates) lines.push(["template", name, t.sandboxes, t.cpu.toFixed(3), t.cost].map(csvField).join(","));
    const url = URL.createObjectURL(new Blob([lines.join("\n") + "\n"], { type: "text/csv" }));
    el("a", { href: url, download: "paddock-usage.csv" }).click();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  };

  append(
    main,
    el("h1", {}, "Usage"),
    el("div", { class: "row" }, button("Download CSV", csv, { id: "usage-csv" })),
    el(
      "section",
      { class: "charts", id: "charts" },
      lineChart("Cost per day (units)", xs, [{ label: "cost", values: perDay.map((u) => u.cost_micros / 1e6) }], { bars: true }).el,
      lineChart("CPU per day (seconds)", xs, [{ label: "cpu", values: perDay.map((u) => u.cpu_seconds) }], { bars: true }).el,
    ),
    el("h2", {}, "Per day"),
    el(
      "table",
      {},
      el("thead", {}, el("tr", {}, ...["Day (UTC)", "Sandboxes", "CPU s", "Cost"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, ...perDay.map((u, i) => el("tr", {}, el("td", {}, windows[i].from.toISOString().slice(0, 10)), el("td", { class: "num" }, u.sandboxes), el("td", { class: "num" }, u.cpu_seconds.toFixed(1)), el("td", { class: "num" }, fmtCost(u.cost_micros))))),
    ),
    el("h2", {}, "Per template"),
    el("p", { class: "hint" }, `Sandboxes whose records are still kept (at most ${maxSandboxes}), whole-life counters.`),
    el(
      "table",
      {},
      el("thead", {}, el("tr", {}, ...["Template", "Sandboxes", "CPU s", "Cost"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, ...templates.map(([name, t]) => el("tr", {}, el("td", {}, name), el("td", { class: "num" }, t.sandboxes), el("td", { class: "num" }, t.cpu.toFixed(1)), el("td", { class: "num" }, fmtCost(t.cost))))),
    ),
  );
  return null;
}
