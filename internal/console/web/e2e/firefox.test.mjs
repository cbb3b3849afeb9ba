// The console in Debian's firefox-esr (headless, WebDriver BiDi): sign in
// with the keyboard, the list, a sandbox's terminal, its files (a hostile
// name as text) and a plot with its series painted. SCREENSHOTS=dir saves
// firefox.png there.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { startDaemon } from "./daemon.mjs";
import { launchFirefox } from "./firefox.mjs";

const hostile = "<img src=x onerror=alert(1)>";

describe("console in firefox-esr", { timeout: 180_000 }, () => {
  let d, ff, sb;

  before(async () => {
    d = await startDaemon();
    ff = await launchFirefox();
    sb = await d.api(0, "POST", "/sandboxes", { metadata: { t: "firefox" } });
    await d.api(0, "PUT", `/sandboxes/${sb.id}/files?path=${encodeURIComponent("/workspace/" + hostile)}`, "x", true);
  });
  after(async () => {
    await ff?.close();
    await d?.stop();
  });

  it("signs in by keyboard and lists the sandbox", async () => {
    assert.match(ff.version, /^\d+/);
    await ff.goto(d.url + "/");
    await ff.waitFor(`document.activeElement?.id === "key"`);
    await ff.type(d.keys[0] + "\n");
    await ff.waitFor(`document.querySelector('#sandboxes tr[data-id="${sb.id}"]')`);
    assert.match(await ff.evaluate(`document.querySelector('#sandboxes tr[data-id="${sb.id}"]').textContent`), /running/);
  });

  it("runs a command in the terminal", async () => {
    await ff.evaluate(`location.hash = "#/sandbox/${sb.id}"`);
    await ff.waitFor(`document.getElementById("terminal-state")?.textContent === "connected"`);
    await ff.evaluate(`document.querySelector("#terminal textarea").focus()`);
    await ff.type("echo ff$((40+2))\n");
    await ff.waitFor(`/^ff42\\s*$/m.test(document.querySelector("#terminal .xterm-rows")?.innerText ?? "")`, 15_000);
  });

  it("shows a hostile file name as text", async () => {
    await ff.waitFor(`[...document.querySelectorAll("#files .fname")].some((e) => e.textContent === ${JSON.stringify(hostile)})`);
    assert.equal(await ff.evaluate(`document.querySelectorAll("#files img").length`), 0);
  });

  it("plots the metrics", async () => {
    // The first series' colour (#2563eb) painted: a plotted line, not just axes.
    await ff.waitFor(`(() => {
      const c = document.querySelector("#charts canvas");
      if (!c) return false;
      const px = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 0; i < px.length; i += 4) if (px[i + 3] > 128 && px[i] < 100 && px[i + 1] > 60 && px[i + 1] < 140 && px[i + 2] > 190) n++;
      return n > 20;
    })()`, 30_000);
    if (process.env.SCREENSHOTS) await ff.screenshot(join(process.env.SCREENSHOTS, "firefox.png"));
  });
});
