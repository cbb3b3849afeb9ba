// A sandbox: its record and lifecycle actions, a live terminal, files,
// background processes, the network policy and its metrics plotted.
import { call, sbPath, type Sandbox } from "../api";
import { el, append, replace, notice } from "../dom";
import { actions } from "./sandboxes";
import { openTerminal } from "./terminal";
import { filesPanel } from "./files";
import { processesPanel } from "./processes";
import { metricsPanel } from "./metrics";

export async function sandboxPage(main: HTMLElement, id: string): Promise<() => void> {
  const sb = await call<Sandbox>("GET", sbPath(id));
  const cleanups: (() => void)[] = [];
  const info = el("dl", { class: "info" });
  const head = el("div", { class: "row" });
  function show(s: Sandbox): void {
    const item = (k: string, v: string) => [el("dt", {}, k), el("dd", {}, v)];
    replace(
      info,
      ...item("State", s.state),
      ...item("Template", s.template),
      ...item("Created", new Date(s.created_at).toLocaleString()),
      ...item("Lease ends", new Date(s.expires_at).toLocaleString()),
      ...item("Resources", `${s.resources.vcpus ?? "?"} vCPU, ${s.resources.memory_mib ?? "?"} MiB`),
      ...item("Metadata", Object.entries(s.metadata ?? {}).map(([k, v]) => `${k}=${v}`).join(", ") || "—"),
    );
    replace(head, actions(s, refresh));
  }
  async function refresh(): Promise<void> {
    const s = await call<Sandbox>("GET", sbPath(id));
    if (s.state === "terminated") {
      location.hash = "#/sandboxes";
      return;
    }
    show(s);
    replace(net, networkPanel(s));
    terminal(s.state);
  }
  // The terminal follows the state: open while running (again after a
  // resume or start), closed otherwise.
  let closeTerm: (() => void) | null = null;
  function terminal(state: string): void {
    if (state === "running" && !closeTerm) {
      replace(term);
      closeTerm = openTerminal(term, id);
    } else if (state !== "running") {
      closeTerm?.();
      closeTerm = null;
      replace(term, el("p", {}, `The terminal needs a running sandbox (this one is ${state}).`));
    }
  }
  const net = el("section", { "aria-label": "Network" });
  show(sb);
  const term = el("section", { class: "terminal-box", "aria-label": "Terminal" });
  append(
    main,
    el("h1", {}, "Sandbox ", el("code", {}, sb.id)),
    head,
    info,
    el("h2", {}, "Terminal"),
    term,
    el("h2", {}, "Files"),
    await filesPanel(id),
    el("h2", {}, "Processes"),
    await processesPanel(id, cleanups),
    el("h2", {}, "Network"),
    net,
    el("h2", {}, "Metrics"),
    await metricsPanel(id, cleanups),
  );
  replace(net, networkPanel(sb));
  terminal(sb.state);
  cleanups.push(() => closeTerm?.());
  return () => cleanups.forEach((c) => c());
}

function networkPanel(sb: Sandbox): HTMLElement {
  const n = sb.network ?? { mode: "off" };
  const mode = el("select", { id: "n-mode", "aria-label": "Network mode" }, ...["off", "full", "allowlist"].map((m) => el("option", { value: m, selected: m === n.mode }, m)));
  const allow = el("input", { id: "n-allow", value: (n.allow ?? []).join(", "), placeholder: "example.com, *.pypi.org", "aria-label": "Allowed hosts" });
  const form = el("form", { class: "row" }, el("label", { for: "n-mode" }, "Mode"), mode, el("label", { for: "n-allow" }, "Allow"), allow, el("button", { type: "submit" }, "Apply"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const policy: Record<string, unknown> = { mode: mode.value };
    if (mode.value === "allowlist") policy.allow = allow.value.split(",").map((s) => s.trim()).filter(Boolean);
    try {
      await call("PATCH", sbPath(sb.id, "network"), policy);
      notice("network policy applied");
    } catch (err) {
      notice("network: " + (err as Error).message);
    }
  });
  return form;
}
