// Secrets: names and the hosts each is bound to (values never leave the daemon).
import { call } from "../api";
import { el, append, table } from "../dom";
import type { Secret } from "../../../../../sdk/typescript/src/types.gen.js";

export async function secretsPage(main: HTMLElement): Promise<null> {
  const { secrets } = await call<{ secrets: Secret[] }>("GET", "/secrets");
  const rows = (secrets ?? []).map((s) =>
    el("tr", {}, el("td", {}, s.name), el("td", {}, (s.hosts ?? []).join(", ")), el("td", {}, new Date(s.created_at).toLocaleString())),
  );
  append(
    main,
    el("h1", {}, "Secrets"),
    el("p", { class: "hint" }, "Names and hosts only: a secret's value never leaves the daemon, and sandboxes see a placeholder."),
    rows.length
      ? table(["Name", "Hosts", "Created"], rows)
      : el("p", {}, "No secrets."),
  );
  return null;
}
