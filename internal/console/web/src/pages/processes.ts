// Background processes: list, start, kill, and read their output.
import { call, raw, ndjson, sbPath } from "../api";
import { el, replace, button, notice } from "../dom";
import type { ProcessInfo as Proc } from "../../../../../sdk/typescript/src/types.gen.js";

/** maxOutputChars bounds the output shown per process. */
const maxOutputChars = 256 << 10;

export async function processesPanel(id: string, cleanups: (() => void)[]): Promise<HTMLElement> {
  const list = el("div", { id: "processes" });
  const out = el("pre", { class: "output", id: "process-output", "aria-live": "polite" });
  const cmd = el("input", { id: "p-cmd", placeholder: "python3 -m http.server 8000", "aria-label": "Command" });
  let reading: AbortController | null = null;
  cleanups.push(() => reading?.abort());

  async function show(p: Proc): Promise<void> {
    reading?.abort();
    reading = new AbortController();
    replace(out, "");
    const dec = new TextDecoder();
    const r = await raw("GET", sbPath(id, "processes", encodeURIComponent(p.id), "output"), undefined, undefined, reading.signal);
    await ndjson(r, (ev) => {
      let s = "";
      if (ev.type === "stdout" || ev.type === "stderr") s = dec.decode(Uint8Array.from(atob(ev.data ?? ""), (c) => c.charCodeAt(0)), { stream: true });
      else if (ev.type === "exit") s = `\n[exit ${ev.exit_code ?? ev.signal ?? ""}]\n`;
      if (s && (out.textContent?.length ?? 0) < maxOutputChars) out.textContent += s;
    }).catch(() => {});
  }

  async function load(): Promise<void> {
    const { processes } = await call<{ processes: Proc[] }>("GET", sbPath(id, "processes"));
    const rows = (processes ?? []).map((p) =>
      el(
        "tr",
        {},
        el("td", {}, p.id),
        el("td", {}, p.command ?? (p.argv ?? []).join(" ")),
        el("td", {}, p.state),
        el("td", { class: "actions" }, button("Output", () => show(p)), p.state === "running" && button("Kill", async () => {
          await call("POST", sbPath(id, "processes", encodeURIComponent(p.id), "kill"), {});
          await load();
        }, { class: "danger" })),
      ),
    );
    replace(list, rows.length ? el("table", {}, el("tbody", {}, ...rows)) : el("p", {}, "No background processes."));
  }

  const form = el("form", { class: "row" }, el("label", { for: "p-cmd" }, "Start"), cmd, el("button", { type: "submit" }, "Run in background"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const p = await call<Proc>("POST", sbPath(id, "processes"), { command: cmd.value });
      cmd.value = "";
      await load();
      void show(p);
    } catch (err) {
      notice("process: " + (err as Error).message);
    }
  });
  await load().catch((err) => replace(list, el("p", {}, "processes: " + err.message)));
  return el("section", { "aria-label": "Processes" }, form, list, out);
}
