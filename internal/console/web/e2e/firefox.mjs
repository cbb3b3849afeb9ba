// Debian's firefox-esr driven over WebDriver BiDi, the W3C protocol stock
// Firefox speaks (Playwright's Firefox needs its own patched build). Only
// what the console's Firefox test uses: navigate, evaluate, type, screenshot.
// Needs Node's WebSocket (Node 20: --experimental-websocket, see package.json).
import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** launchFirefox starts a headless firefox-esr with a fresh profile and opens a BiDi session. */
export async function launchFirefox(bin = process.env.FIREFOX || "/usr/bin/firefox-esr") {
  const profile = await mkdtemp(join(tmpdir(), "paddock-firefox-"));
  // No first-run pages, updates or background requests to other hosts.
  await writeFile(join(profile, "user.js"), [
    'user_pref("browser.shell.checkDefaultBrowser", false);',
    'user_pref("app.update.disabledForTesting", true);',
    'user_pref("browser.startup.homepage_override.mstone", "ignore");',
    'user_pref("datareporting.policy.dataSubmissionEnabled", false);',
    'user_pref("network.captive-portal-service.enabled", false);',
    'user_pref("network.connectivity-service.enabled", false);',
    'user_pref("browser.safebrowsing.update.enabled", false);',
    'user_pref("extensions.update.enabled", false);',
    'user_pref("remote.prefs.recommended", true);',
  ].join("\n"));
  const child = spawn(bin, ["--headless", "--no-remote", "--profile", profile, "--remote-debugging-port=0", "about:blank"], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, MOZ_HEADLESS: "1" },
  });
  const exited = new Promise((ok) => child.once("exit", ok));
  let log = "";
  const wsURL = await new Promise((ok, fail) => {
    const t = setTimeout(() => fail(new Error("firefox-esr did not start WebDriver BiDi:\n" + log.slice(-2000))), 30_000);
    const seen = (b) => {
      log = (log + b.toString()).slice(-20_000);
      const m = /WebDriver BiDi listening on (ws:\/\/\S+)/.exec(log);
      if (m) {
        clearTimeout(t);
        ok(m[1]);
      }
    };
    child.stdout.on("data", seen);
    child.stderr.on("data", seen);
    child.once("exit", (code) => fail(new Error(`firefox-esr exited (${code}):\n` + log.slice(-2000))));
  });
  const ws = new WebSocket(wsURL + "/session");
  await new Promise((ok, fail) => {
    ws.onopen = ok;
    ws.onerror = () => fail(new Error("cannot connect to " + wsURL));
  });
  let next = 0;
  const pending = new Map();
  ws.onmessage = (m) => {
    const msg = JSON.parse(m.data);
    const p = pending.get(msg.id);
    if (!p) return; // an event
    pending.delete(msg.id);
    if (msg.type === "error") p.fail(new Error(`${msg.error}: ${msg.message}`));
    else p.ok(msg.result);
  };
  /** send runs one BiDi command and resolves with its result. */
  const send = (method, params = {}) =>
    new Promise((ok, fail) => {
      const id = ++next;
      pending.set(id, { ok, fail });
      ws.send(JSON.stringify({ id, method, params }));
    });
  const version = (await send("session.new", { capabilities: {} })).capabilities.browserVersion;
  const context = (await send("browsingContext.getTree", {})).contexts[0].context;

  return {
    version,
    goto: (url) => send("browsingContext.navigate", { context, url, wait: "complete" }),
    /** evaluate runs an expression (awaiting a promise) and returns its primitive value. */
    async evaluate(expression) {
      const r = await send("script.evaluate", { expression, target: { context }, awaitPromise: true });
      if (r.type !== "success") throw new Error("script: " + (r.exceptionDetails?.text ?? JSON.stringify(r)));
      return r.result.value;
    },
    /** waitFor polls an expression until it is truthy. */
    async waitFor(expression, timeout = 20_000) {
      const end = Date.now() + timeout;
      for (;;) {
        const v = await this.evaluate(`(() => { try { return !!(${expression}); } catch { return false; } })()`);
        if (v) return;
        if (Date.now() > end) throw new Error("timed out waiting for " + expression);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    /** type presses and releases each character's key in the focused element ("\n" is Enter). */
    type: (text) =>
      send("input.performActions", {
        context,
        actions: [{ type: "key", id: "kb", actions: [...text].flatMap((c) => {
          const value = c === "\n" ? "\uE007" : c;
          return [{ type: "keyDown", value }, { type: "keyUp", value }];
        }) }],
      }),
    async screenshot(path) {
      const { data } = await send("browsingContext.captureScreenshot", { context, origin: "document" });
      await writeFile(path, Buffer.from(data, "base64"));
    },
    async close() {
      await send("session.end").catch(() => {});
      ws.close();
      child.kill("SIGTERM");
      const t = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(t);
      await rm(profile, { recursive: true, force: true });
    },
  };
}
