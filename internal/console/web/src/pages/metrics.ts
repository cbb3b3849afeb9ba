// A sandbox's CPU, memory, network and cost over time, from its metrics
// history (GET /v1/sandboxes/{id}/metrics/history), refreshed every 5 s.
import { call, sbPath, type MetricsSample } from "../api";
import { el, replace } from "../dom";
import { lineChart, rates } from "../chart";

export async function metricsPanel(id: string, cleanups: (() => void)[]): Promise<HTMLElement> {
  const box = el("section", { class: "charts", id: "charts", "aria-label": "Metrics" });
  async function draw(): Promise<void> {
    const h = await call<{ samples: MetricsSample[] }>("GET", sbPath(id, "metrics", "history"));
    const s = h.samples ?? [];
    if (s.length < 2) {
      replace(box, el("p", { class: "hint" }, "Collecting samples (one every 5 seconds)…"));
      return;
    }
    const xs = s.map((x) => Date.parse(x.at) / 1000);
    replace(
      box,
      lineChart("CPU (cores)", xs, [{ label: "cpu", values: rates(xs, s.map((x) => x.cpu_seconds)) }]).el,
      lineChart("Memory (MiB)", xs, [{ label: "memory", values: s.map((x) => x.memory_bytes / 1048576) }]).el,
      lineChart("Network (KiB/s)", xs, [
        { label: "rx", values: rates(xs, s.map((x) => x.network_rx_bytes / 1024)) },
        { label: "tx", values: rates(xs, s.map((x) => x.network_tx_bytes / 1024)) },
      ]).el,
      lineChart("Cost (units)", xs, [{ label: "cost", values: s.map((x) => x.cost_micros / 1e6) }]).el,
    );
  }
  await draw().catch((err) => replace(box, el("p", {}, "metrics: " + err.message)));
  const t = setInterval(() => void draw().catch(() => {}), 5000);
  cleanups.push(() => clearInterval(t));
  return box;
}
