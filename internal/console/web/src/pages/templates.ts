// Templates: the list, and a build from a Dockerfile or a recipe with its
// live build log and progress.
import { call, raw, ndjson } from "../api";
import { el, append, replace, notice, fmtBytes, button, table } from "../dom";
import type { Template } from "../../../../../sdk/typescript/src/types.gen.js";

/** maxLogChars bounds the build log kept on the page. */
const maxLogChars = 512 << 10;

export async function templatesPage(main: HTMLElement): Promise<null> {
  const list = el("div", { id: "templates" });
  async function load(): Promise<void> {
    const { templates } = await call<{ templates: Template[] }>("GET", "/templates");
    const rows = (templates ?? []).map((t) =>
      el(
        "tr",
        {},
        el("td", {}, t.name),
        el("td", {}, t.source),
        el("td", {}, t.status),
        el("td", { class: "num" }, fmtBytes(t.size)),
        el("td", {}, t.shared ? "shared" : "yours"),
        el("td", {}, new Date(t.created_at).toLocaleString()),
        el("td", {}, !t.shared && button("Delete", async () => {
          if (!confirm(`Delete template ${t.name}?`)) return;
          await call("DELETE", "/templates/" + encodeURIComponent(t.name));
          await load();
        }, { class: "danger" })),
      ),
    );
    replace(list, table(["Name", "Source", "Status", "Size", "Owner", "Created", ""], rows));
  }

  const name = el("input", { id: "t-name", required: true, placeholder: "my-python", pattern: "[a-z0-9][a-z0-9._-]*" });
  const kind = el("select", { id: "t-kind" }, el("option", { value: "dockerfile" }, "Dockerfile"), el("option", { value: "recipe" }, "Recipe (JSON)"));
  const text = el("textarea", { id: "t-text", rows: 8, spellcheck: "false" });
  text.value = "FROM base\nRUN echo built > /etc/built\n";
  const progress = el("progress", { id: "t-progress", max: 1, value: 0, "aria-label": "Build progress" });
  const log = el("pre", { class: "output", id: "t-log", "aria-live": "polite" });
  const form = el(
    "form",
    { class: "create", "aria-label": "Build a template" },
    el("h2", {}, "Build a template"),
    el("div", { class: "field" }, el("label", { for: "t-name" }, "Name"), name),
    el("div", { class: "field" }, el("label", { for: "t-kind" }, "From"), kind),
    el("div", { class: "field wide" }, el("label", { for: "t-text" }, "Dockerfile or recipe"), text),
    el("button", { type: "submit" }, "Build"),
    progress,
    log,
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body: Record<string, unknown> = { name: name.value };
    try {
      if (kind.value === "recipe") body.recipe = JSON.parse(text.value);
      else body.dockerfile = text.value;
    } catch {
      notice("the recipe is not valid JSON");
      return;
    }
    replace(log, "");
    const add = (s: string) => {
      if ((log.textContent?.length ?? 0) < maxLogChars) log.textContent += s;
    };
    try {
      const r = await raw("POST", "/templates", JSON.stringify(body), "application/json", undefined, "application/x-ndjson");
      await ndjson(r, (ev) => {
        if (ev.steps) {
          progress.max = ev.steps;
          // Step k starting means k-1 are done; a cached step k is done.
          progress.value = ev.type === "cached" ? (ev.step ?? 0) : Math.max(0, (ev.step ?? 1) - 1);
        }
        if (ev.type === "step" || ev.type === "cached")
          add(`\n[${ev.step ?? 0}/${ev.steps ?? "?"}]${ev.type === "cached" ? " (cached)" : ""} ${ev.instruction ?? ""}\n`);
        else if (ev.output) add(ev.output);
        else if (ev.type === "done" || ev.template) {
          progress.value = progress.max;
          add(`\nbuilt ${ev.template?.name ?? ""}\n`);
        } else if (ev.error) add(`\nerror: ${ev.error.message}\n`);
      });
      await load();
    } catch (err) {
      add("\n" + (err as Error).message + "\n");
    }
  });
  append(main, el("h1", {}, "Templates"), list, form);
  await load();
  return null;
}
