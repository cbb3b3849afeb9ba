// The Paddock web console: a single page with hash routes, talking to the
// REST API under /console/v1 with the session cookie.
import "./style.css";
import * as api from "./api";
import { el, replace, link, report, button } from "./dom";
import { sandboxesPage } from "./pages/sandboxes";
import { sandboxPage } from "./pages/sandbox";
import { templatesPage } from "./pages/templates";
import { usagePage } from "./pages/usage";
import { secretsPage } from "./pages/secrets";

const app = document.getElementById("app")!;
let cleanup: (() => void) | null = null;

function signInPage(): void {
  const key = el("input", { type: "password", id: "key", name: "key", autocomplete: "off", required: true, placeholder: "pdk_…", "aria-label": "API key" });
  const err = el("p", { id: "status", role: "status" });
  const form = el(
    "form",
    { class: "signin" },
    el("h1", {}, "Paddock"),
    el("label", { for: "key" }, "API key"),
    key,
    el("button", { type: "submit" }, "Sign in"),
    err,
    el("p", { class: "hint" }, "The key is exchanged for a session cookie; it is not stored in the browser."),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      await api.signIn(key.value);
      key.value = "";
      route();
    } catch (e) {
      replace(err, el("span", { class: "error", role: "alert" }, (e as Error).message));
    }
  });
  replace(app, form);
  key.focus();
}

function shell(who: api.SessionInfo): HTMLElement {
  const main = el("main", { id: "main", tabindex: -1 });
  const nav = el(
    "nav",
    { "aria-label": "Console" },
    el("strong", {}, "Paddock"),
    link("/sandboxes", "Sandboxes"),
    link("/templates", "Templates"),
    link("/usage", "Usage"),
    link("/secrets", "Secrets"),
    el("span", { class: "who", title: "API key id" }, who.key_id),
    button("Sign out", async () => {
      await api.signOut();
      location.hash = "";
      signInPage();
    }),
  );
  replace(app, el("header", {}, nav), el("p", { id: "status", role: "status" }), main);
  return main;
}

async function route(): Promise<void> {
  cleanup?.();
  cleanup = null;
  const who = await api.session();
  if (!who) return signInPage();
  const main = shell(who);
  const [, page = "sandboxes", arg = ""] = location.hash.replace(/^#/, "").split("/");
  for (const a of document.querySelectorAll("nav a")) {
    if ((a as HTMLAnchorElement).hash === "#/" + page) a.setAttribute("aria-current", "page");
  }
  try {
    switch (page) {
      case "sandbox":
        cleanup = await sandboxPage(main, decodeURIComponent(arg));
        break;
      case "templates":
        cleanup = await templatesPage(main);
        break;
      case "usage":
        cleanup = await usagePage(main);
        break;
      case "secrets":
        cleanup = await secretsPage(main);
        break;
      default:
        cleanup = await sandboxesPage(main);
    }
  } catch (e) {
    report(e);
  }
}

api.setSignedOutHandler(() => {
  cleanup?.();
  cleanup = null;
  signInPage();
});
window.addEventListener("hashchange", () => void route());
void route();
