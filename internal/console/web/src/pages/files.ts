// The file browser: list a directory, open subdirectories, upload,
// download and delete. Names are text, whatever they contain.
import { call, raw, sbPath, type FileEntry } from "../api";
import { el, replace, button, notice, fmtBytes, table } from "../dom";

export async function filesPanel(id: string): Promise<HTMLElement> {
  const path = el("input", { id: "f-path", value: "/workspace", "aria-label": "Directory" });
  const list = el("div", { id: "files" });
  const upload = el("input", { id: "f-upload", type: "file", "aria-label": "Upload a file" });
  const q = (p: string) => "?path=" + encodeURIComponent(p);
  const join = (dir: string, name: string) => (dir.endsWith("/") ? dir : dir + "/") + name;

  async function load(): Promise<void> {
    const { entries, truncated } = await call<{ entries: FileEntry[]; truncated?: boolean }>("GET", sbPath(id, "files", "list") + q(path.value));
    const rows = (entries ?? [])
      .sort((a, b) => Number(b.type === "dir") - Number(a.type === "dir") || a.name.localeCompare(b.name))
      .map((f) => {
        const p = f.path || join(path.value, f.name);
        const name =
          f.type === "dir"
            ? button(f.name + "/", async () => {
                path.value = p;
                await load();
              }, { class: "linklike" })
            : el("span", { class: "fname" }, f.name);
        return el(
          "tr",
          {},
          el("td", {}, name),
          el("td", {}, f.type),
          el("td", { class: "num" }, f.type === "file" ? fmtBytes(f.size) : ""),
          el("td", {}, f.mode),
          el(
            "td",
            { class: "actions" },
            f.type === "file" && button("Download", () => download(p, f.name)),
            button("Delete", async () => {
              if (!confirm(`Delete ${p}?`)) return;
              await raw("DELETE", sbPath(id, "files") + q(p) + (f.type === "dir" ? "&recursive=true" : ""));
              await load();
            }, { class: "danger" }),
          ),
        );
      });
    replace(
      list,
      table(["Name", "Type", "Size", "Mode", ""], rows),
      truncated ? el("p", { class: "hint" }, "(listing truncated)") : null,
    );
  }

  async function download(p: string, name: string): Promise<void> {
    const r = await raw("GET", sbPath(id, "files") + q(p));
    const url = URL.createObjectURL(await r.blob());
    const a = el("a", { href: url, download: name });
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  upload.addEventListener("change", async () => {
    const file = upload.files?.[0];
    if (!file) return;
    try {
      await raw("PUT", sbPath(id, "files") + q(join(path.value, file.name)), file, "application/octet-stream");
      notice("uploaded " + file.name);
      upload.value = "";
      await load();
    } catch (e) {
      notice("upload failed: " + (e as Error).message);
    }
  });
  const form = el("form", { class: "row" }, el("label", { for: "f-path" }, "Directory"), path, el("button", { type: "submit" }, "Open"), el("label", { for: "f-upload" }, "Upload"), upload);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    load().catch((err) => notice("files: " + err.message));
  });
  await load().catch((err) => replace(list, el("p", {}, "files: " + err.message)));
  return el("section", { "aria-label": "Files" }, form, list);
}
