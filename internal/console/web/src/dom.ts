// DOM building without HTML: every string becomes a text node or an
// attribute value, never markup, so nothing a sandbox returns (file names,
// output, metadata) can become an element or a script.

export type Child = Node | string | number | null | undefined | false;

/** el creates <tag> with attributes (event handlers for "on*" keys) and children. */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number | boolean | ((e: any) => void) | undefined> = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (typeof v === "function") {
      e.addEventListener(k.slice(2).toLowerCase(), v);
    } else if (k === "value" && "value" in e) {
      (e as HTMLInputElement).value = String(v);
    } else {
      if (/^on|^srcdoc$/i.test(k)) throw new Error("unsafe attribute " + k);
      e.setAttribute(k, v === true ? "" : String(v));
    }
  }
  append(e, ...children);
  return e;
}

/** append adds children; strings are text nodes. */
export function append(parent: Node, ...children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    parent.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
}

/** replace empties parent and adds children. */
export function replace(parent: Node, ...children: Child[]): void {
  while (parent.firstChild) parent.removeChild(parent.firstChild);
  append(parent, ...children);
}

/** link is an in-app link to a hash route. */
export function link(route: string, ...children: Child[]): HTMLAnchorElement {
  return el("a", { href: "#" + route }, ...children);
}

/** button runs fn on click, disabled while it runs; errors go to report. */
export function button(label: string, fn: () => Promise<unknown> | void, attrs: Record<string, string> = {}): HTMLButtonElement {
  const b = el("button", { type: "button", ...attrs }, label);
  b.addEventListener("click", async () => {
    b.disabled = true;
    try {
      await fn();
    } catch (err) {
      report(err);
    } finally {
      b.disabled = false;
    }
  });
  return b;
}

/** report shows an error in the status line. */
export function report(err: unknown): void {
  const s = document.getElementById("status");
  const msg = err instanceof Error ? err.message : String(err);
  if (s) replace(s, el("span", { class: "error", role: "alert" }, msg));
  else console.error(msg);
}

/** notice shows a message in the status line. */
export function notice(msg: string): void {
  const s = document.getElementById("status");
  if (s) replace(s, msg);
}

export function fmtBytes(n: number): string {
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) {
    n /= 1024;
    i++;
  }
  return (i ? n.toFixed(1) : String(n)) + " " + u[i];
}

export function fmtDuration(ms: number): string {
  const neg = ms < 0;
  let s = Math.floor(Math.abs(ms) / 1000);
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
  s %= 60;
  const t = d ? `${d}d ${h}h` : h ? `${h}h ${m}m` : m ? `${m}m ${s}s` : `${s}s`;
  return neg ? "-" + t : t;
}

/** fmtCost shows micro-units as units with 4 decimals. */
export function fmtCost(micros: number): string {
  return (micros / 1e6).toFixed(4);
}

/** table builds a table with column headers; each cell carries its header
 * as data-label, which narrow screens show before the value. */
export function table(headers: string[], rows: HTMLTableRowElement[]): HTMLTableElement {
  for (const r of rows) {
    [...r.cells].forEach((c, i) => {
      if (headers[i]) c.dataset.label = headers[i];
    });
  }
  return el("table", {}, el("thead", {}, el("tr", {}, ...headers.map((h) => el("th", { scope: "col" }, h)))), el("tbody", {}, ...rows));
}

/** replaceKeepingFocus is replace for a list that re-renders while someone
 * may be on it with the keyboard: when the focus was on a control in a row
 * (data-id), the same control of the new row with that id gets it back, so
 * a periodic refresh does not throw a keyboard user back to the top. */
export function replaceKeepingFocus(parent: HTMLElement, ...children: Child[]): void {
  const active = document.activeElement;
  const row = active instanceof HTMLElement && parent.contains(active) ? active.closest<HTMLElement>("[data-id]") : null;
  const focusables = (r: Element) => [...r.querySelectorAll<HTMLElement>("a[href], button, input, select, textarea")];
  const at = row && active ? focusables(row).indexOf(active as HTMLElement) : -1;
  replace(parent, ...children);
  if (!row || at < 0) return;
  const again = [...parent.querySelectorAll<HTMLElement>("[data-id]")].find((r) => r.dataset.id === row.dataset.id);
  if (again) focusables(again)[at]?.focus();
}
