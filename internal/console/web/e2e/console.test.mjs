// The console end to end: a real paddockd, Debian's chromium driven by
// playwright-core (headless, --no-sandbox as root, background networking
// off). SCREENSHOTS=dir saves a picture of each page there.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { startDaemon } from "./daemon.mjs";

const shots = process.env.SCREENSHOTS;
const hostile = "<img src=x onerror=alert(1)>";

describe("console", { timeout: 300_000 }, () => {
  let d, browser, page;
  const alerts = [];
  const cspErrors = [];

  before(async () => {
    d = await startDaemon();
    browser = await chromium.launch({
      executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
      headless: true,
      args: ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--no-first-run", "--disable-default-apps", "--disable-dev-shm-usage"],
    });
    page = await (await browser.newContext({ viewport: { width: 1100, height: 900 } })).newPage();
    page.on("dialog", (dlg) => {
      if (dlg.type() === "alert") alerts.push(dlg.message());
      dlg.accept();
    });
    page.on("console", (m) => {
      if (/Content.Security.Policy/i.test(m.text())) cspErrors.push(m.text());
    });
  });
  after(async () => {
    await browser?.close();
    await d?.stop();
  });

  const shot = async (name) => shots && (await page.screenshot({ path: join(shots, name + ".png"), fullPage: true }));

  it("signs in with an API key", async () => {
    await page.goto(d.url + "/");
    await page.fill("#key", "pdk_wrong");
    await page.press("#key", "Enter");
    await page.waitForSelector("form.signin .error");
    await shot("signin");
    await page.fill("#key", d.keys[0]);
    await page.press("#key", "Enter");
    await page.waitForSelector("nav");
    const cookies = await page.context().cookies();
    assert.equal(cookies.length, 1);
    assert.equal(cookies[0].httpOnly, true);
    assert.equal(cookies[0].sameSite, "Strict");
    assert.equal(cookies[0].path, "/console/");
  });

  let id;
  it("creates a sandbox", async () => {
    await page.fill("#c-meta", "t=e2e");
    await page.click("#c-submit");
    const row = await page.waitForSelector("#sandboxes tr[data-id]", { timeout: 60_000 });
    id = await row.getAttribute("data-id");
    assert.match(await row.textContent(), /running/);
    await shot("sandboxes");
  });

  it("runs echo hi in the terminal", async () => {
    await page.click(`a[href="#/sandbox/${id}"]`);
    await page.waitForFunction(() => document.getElementById("terminal-state")?.textContent === "connected", null, { timeout: 20_000 });
    await page.click("#terminal");
    await page.keyboard.type("echo hi\n");
    await page.waitForFunction(() => /^hi\s*$/m.test(document.querySelector("#terminal .xterm-rows")?.innerText ?? ""), null, { timeout: 15_000 });
  });

  it("uploads a file and lists it", async () => {
    await page.setInputFiles("#f-upload", { name: "up.txt", mimeType: "text/plain", buffer: Buffer.from("uploaded\n") });
    await page.waitForFunction(() => [...document.querySelectorAll("#files .fname")].some((e) => e.textContent === "up.txt"));
    assert.equal(await d.api(0, "GET", `/sandboxes/${id}/files?path=up.txt`), "uploaded\n");
  });

  it("shows a hostile file name as text", async () => {
    await d.api(0, "PUT", `/sandboxes/${id}/files?path=${encodeURIComponent("/workspace/" + hostile)}`, "x", true);
    await page.click("#f-path + button");
    await page.waitForFunction((n) => [...document.querySelectorAll("#files .fname")].some((e) => e.textContent === n), hostile);
    assert.equal(await page.locator("#files img").count(), 0);
    assert.deepEqual(alerts, []);
  });

  it("plots the metrics", async () => {
    // Two metering passes (5 s apart) make the first plot.
    await page.waitForSelector("#charts canvas", { timeout: 20_000 });
    // Axes and grid are painted even without data: count the pixels of the
    // first series' line (#2563eb), which only a plotted series paints.
    await page.waitForFunction(() => {
      const c = document.querySelector("#charts canvas");
      const px = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 0; i < px.length; i += 4) if (px[i + 3] > 128 && px[i] < 100 && px[i + 1] > 60 && px[i + 1] < 140 && px[i + 2] > 190) n++;
      return n > 20;
    }, null, { timeout: 20_000 });
    await shot("sandbox");
  });

  it("pauses and resumes", async () => {
    await page.click("button:text-is('Pause')");
    await page.waitForFunction(() => /State\s*paused/.test(document.querySelector("dl.info")?.textContent ?? ""), null, { timeout: 20_000 });
    await page.click("button:text-is('Resume')");
    await page.waitForFunction(() => /State\s*running/.test(document.querySelector("dl.info")?.textContent ?? ""), null, { timeout: 20_000 });
  });

  it("builds a template with a live build log and progress", async () => {
    await page.click('nav a[href="#/templates"]');
    await page.waitForSelector("#templates table, #templates p");
    await page.fill("#t-name", "e2e-built");
    await page.selectOption("#t-kind", "dockerfile");
    await page.fill("#t-text", "FROM base\nRUN echo first-line && sleep 3 && echo second-line\nENV E2E=1\n");
    await page.click("form[aria-label='Build a template'] button[type=submit]");
    // Live: the step's first output line is on the page while the step still
    // runs (the instruction itself, also logged, holds both words).
    const mid = await page.waitForFunction(() => {
      const log = document.getElementById("t-log").textContent;
      const p = document.getElementById("t-progress");
      return /^first-line$/m.test(log) && { log, value: p.value, max: p.max };
    }, null, { timeout: 60_000 });
    const m = await mid.jsonValue();
    assert.doesNotMatch(m.log, /^second-line$|built e2e-built/m);
    assert.match(m.log, /\[1\/2\] RUN echo first-line/);
    assert.equal(m.max, 2);
    assert.ok(m.value < m.max, `progress ${m.value}/${m.max} while the build runs`);
    await page.waitForFunction(() => /built e2e-built/.test(document.getElementById("t-log").textContent), null, { timeout: 120_000 });
    assert.equal(await page.evaluate(() => document.getElementById("t-progress").value), 2);
    assert.match(await page.textContent("#t-log"), /^second-line$[\s\S]*\[2\/2\] ENV E2E=1/m);
    await page.waitForFunction(() => [...document.querySelectorAll("#templates td")].some((td) => td.textContent.startsWith("e2e-built")));
    const t = await d.api(0, "GET", "/templates/e2e-built");
    assert.equal(t.status, "ready");
  });

  it("shows templates, usage and secrets", async () => {
    await d.api(0, "POST", "/secrets", { name: "E2E_TOKEN", value: "v", hosts: ["example.com"] });
    for (const [p, ready] of [["templates", "#templates table"], ["usage", "#charts canvas"], ["secrets", "main:has(h1:text-is('Secrets')) table"]]) {
      await page.click(`nav a[href="#/${p}"]`);
      await page.waitForSelector(ready);
      await shot(p);
    }
    assert.match(await page.textContent("main"), /E2E_TOKEN/);
    assert.doesNotMatch(await page.textContent("main"), /\bv\b.*example/);
  });

  it("deletes the sandbox", async () => {
    await page.goto(d.url + "/#/sandbox/" + id);
    await page.click("button:text-is('Delete')");
    await page.waitForFunction(() => location.hash === "#/sandboxes", null, { timeout: 20_000 });
    await page.waitForFunction((i) => !document.querySelector(`#sandboxes tr[data-id="${i}"]`), id);
    const { sandboxes } = await d.api(0, "GET", "/sandboxes");
    assert.equal(sandboxes.some((s) => s.id === id), false);
  });

  it("shows a second key none of the first key's sandboxes", async () => {
    const mine = await d.api(0, "POST", "/sandboxes", { metadata: { t: "alice" } });
    const ctx = await browser.newContext();
    const p2 = await ctx.newPage();
    await p2.goto(d.url + "/console/");
    await p2.fill("#key", d.keys[1]);
    await p2.press("#key", "Enter");
    await p2.waitForSelector("#sandboxes p, #sandboxes table");
    assert.equal(await p2.locator(`#sandboxes tr[data-id="${mine.id}"]`).count(), 0);
    assert.match(await p2.textContent("#sandboxes"), /No sandboxes/);
    await p2.goto(d.url + "/#/sandbox/" + mine.id);
    await p2.waitForSelector("#status .error");
    await ctx.close();
  });

  it("is readable at a phone's width", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(d.url + "/console/#/sandboxes"); // another path: a fresh load
    await page.waitForSelector("#sandboxes tr[data-id]");
    await shot("phone");
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 1, `the page is ${overflow}px wider than the phone`);
    await page.setViewportSize({ width: 1100, height: 900 });
  });

  it("signs in and opens a sandbox by keyboard only", async () => {
    const sb = await d.api(0, "POST", "/sandboxes", { metadata: { t: "keyboard" } });
    const ctx = await browser.newContext({ viewport: { width: 1100, height: 900 } });
    const p = await ctx.newPage();
    await p.goto(d.url + "/");
    await p.waitForSelector("#key");
    assert.equal(await p.evaluate(() => document.activeElement?.id), "key");
    await p.keyboard.type(d.keys[0]);
    await p.keyboard.press("Enter");
    await p.waitForSelector(`#sandboxes tr[data-id="${sb.id}"]`);
    // Tab to the sandbox's link (the focus must be visible), open it with Enter.
    const tabTo = async (want, limit) => {
      for (let i = 0; i < limit; i++) {
        await p.keyboard.press("Tab");
        const at = await p.evaluate((w) => {
          const a = document.activeElement;
          return a && a.matches(w) ? getComputedStyle(a).outlineStyle : null;
        }, want);
        if (at !== null) return at;
      }
      assert.fail(`${limit} presses of Tab did not reach ${want}`);
    };
    const outline = await tabTo(`a[href="#/sandbox/${sb.id}"]`, 40);
    assert.notEqual(outline, "none", "the focused link shows no focus ring");
    // The list re-renders every 10 s: the new row's link gets the focus back.
    const href = `#/sandbox/${sb.id}`;
    await p.evaluate(() => (document.activeElement.dataset.old = "1"));
    await p.waitForFunction((h) => document.querySelector(`a[href="${h}"]:not([data-old])`), href, { timeout: 15_000 });
    assert.equal(await p.evaluate(() => document.activeElement?.getAttribute("href")), href);
    await p.keyboard.press("Enter");
    await p.waitForFunction(() => document.getElementById("terminal-state")?.textContent === "connected", null, { timeout: 20_000 });
    // The terminal is reached with Tab too, and takes typing.
    await tabTo("#terminal textarea", 40);
    await p.keyboard.type("echo kb$((40+2))\n");
    await p.waitForFunction(() => /^kb42\s*$/m.test(document.querySelector("#terminal .xterm-rows")?.innerText ?? ""), null, { timeout: 15_000 });
    await ctx.close();
  });

  it("broke no Content-Security-Policy rule", () => {
    assert.deepEqual(cspErrors, []);
  });
});
