// Sandboxes: the list (state, template, age, lease left, cost), filters by
// state and metadata, the create form and the lifecycle actions.
import { call, sbPath, type Sandbox, type Metrics } from "../api";
import { el, append, replace, replaceKeepingFocus, link, button, notice, fmtDuration, fmtCost, table } from "../dom";

const STATES = ["", "running", "paused", "stopped", "terminated", "all"];

/** parseKV reads "k=v, k2=v2" into an object. */
export function parseKV(s: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of s.split(",")) {
    const [k, ...v] = part.split("=");
    if (k.trim()) out[k.trim()] = v.join("=").trim();
  }
  return out;
}

/** actions are the lifecycle buttons that fit a sandbox's state. */
export function actions(sb: Sandbox, done: () => void): HTMLElement {
  const act = (verb: string) => async () => {
    await call("POST", sbPath(sb.id, verb), {});
    notice(`${verb}: ${sb.id}`);
    done();
  };
  const span = el("span", { class: "actions" });
  if (sb.state === "running") append(span, button("Pause", act("pause")), button("Stop", act("stop")));
  if (sb.state === "paused") append(span, button("Resume", act("resume")));
  if (sb.state === "stopped") append(span, button("Start", act("start")));
  if (sb.state !== "terminated")
    append(
      span,
      button("Delete", async () => {
        if (!confirm(`Delete sandbox ${sb.id}? Its files are lost.`)) return;
        await call("DELETE", sbPath(sb.id));
        notice(`deleted: ${sb.id}`);
        done();
      }, { class: "danger" }),
    );
  return span;
}

export async function sandboxesPage(main: HTMLElement): Promise<() => void> {
  const state = el("select", { id: "f-state", "aria-label": "State" }, ...STATES.map((s) => el("option", { value: s }, s || "live (not terminated)")));
  const meta = el("input", { id: "f-meta", placeholder: "key=value, …", "aria-label": "Metadata filter" });
  const list = el("div", { id: "sandboxes" });
  const filter = el("form", { class: "row", role: "search" }, el("label", { for: "f-state" }, "State"), state, el("label", { for: "f-meta" }, "Metadata"), meta, el("button", { type: "submit" }, "Filter"));
  filter.addEventListener("submit", (e) => {
    e.preventDefault();
    void load();
  });

  async function load(): Promise<void> {
    const q = new URLSearchParams();
    if (state.value) q.set("state", state.value);
    for (const [k, v] of Object.entries(parseKV(meta.value))) q.set("metadata." + k, v);
    const { sandboxes } = await call<{ sandboxes: Sandbox[] }>("GET", "/sandboxes?" + q.toString());
    const now = Date.now();
    const rows = (sandboxes ?? []).map((sb) => {
      const cost = el("td", { class: "num" }, "…");
      call<Metrics>("GET", sbPath(sb.id, "metrics")).then((m) => replace(cost, fmtCost(m.cost_micros)), () => replace(cost, "—"));
      return el(
        "tr",
        { "data-id": sb.id },
        el("td", {}, link("/sandbox/" + encodeURIComponent(sb.id), sb.id)),
        el("td", { class: "state-" + sb.state }, sb.state),
        el("td", {}, sb.template),
        el("td", {}, fmtDuration(now - Date.parse(sb.created_at))),
        el("td", {}, sb.state === "terminated" ? "—" : fmtDuration(Date.parse(sb.expires_at) - now)),
        cost,
        el("td", { class: "meta" }, Object.entries(sb.metadata ?? {}).map(([k, v]) => `${k}=${v}`).join(", ")),
        el("td", {}, actions(sb, () => void load())),
      );
    });
    replaceKeepingFocus(
      list,
      rows.length
        ? table(["Id", "State", "Template", "Age", "Lease left", "Cost", "Metadata", ""], rows)
        : el("p", {}, "No sandboxes."),
    );
  }

  append(main, el("h1", {}, "Sandboxes"), filter, list, createForm(load));
  await load();
  const timer = setInterval(() => void load().catch(() => {}), 10000);
  return () => clearInterval(timer);
}

function createForm(reload: () => Promise<void>): HTMLElement {
  const f = (id: string, label: string, input: HTMLElement) => el("div", { class: "field" }, el("label", { for: id }, label), input);
  const template = el("input", { id: "c-template", placeholder: "base" });
  const timeout = el("input", { id: "c-timeout", type: "number", min: 1, placeholder: "300" });
  const memory = el("input", { id: "c-memory", type: "number", min: 16, placeholder: "512" });
  const vcpus = el("input", { id: "c-vcpus", type: "number", min: 0.1, step: 0.1, placeholder: "1" });
  const meta = el("input", { id: "c-meta", placeholder: "key=value, …" });
  const onTimeout = el("select", { id: "c-ontimeout" }, ...["kill", "stop", "pause"].map((s) => el("option", { value: s }, s)));
  const network = el("select", { id: "c-network" }, ...["off", "full"].map((s) => el("option", { value: s }, s)));
  const form = el(
    "form",
    { class: "create", "aria-label": "Create a sandbox" },
    el("h2", {}, "Create a sandbox"),
    f("c-template", "Template", template),
    f("c-timeout", "Lease (seconds)", timeout),
    f("c-memory", "Memory (MiB)", memory),
    f("c-vcpus", "vCPUs", vcpus),
    f("c-meta", "Metadata", meta),
    f("c-ontimeout", "On timeout", onTimeout),
    f("c-network", "Network", network),
    el("button", { type: "submit", id: "c-submit" }, "Create"),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body: Record<string, unknown> = { on_timeout: onTimeout.value, network: { mode: network.value } };
    if (template.value) body.template = template.value;
    if (timeout.value) body.timeout_seconds = Number(timeout.value);
    const res: Record<string, number> = {};
    if (memory.value) res.memory_mib = Number(memory.value);
    if (vcpus.value) res.vcpus = Number(vcpus.value);
    if (Object.keys(res).length) body.resources = res;
    const md = parseKV(meta.value);
    if (Object.keys(md).length) body.metadata = md;
    const submit = form.querySelector("button[type=submit]") as HTMLButtonElement;
    submit.disabled = true;
    try {
      const sb = await call<Sandbox>("POST", "/sandboxes", body);
      notice(`created: ${sb.id}`);
      await reload();
    } catch (err) {
      notice("create failed: " + (err as Error).message);
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}
