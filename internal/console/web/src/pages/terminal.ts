// The live terminal: xterm.js over the PTY WebSocket (the session cookie
// authenticates the upgrade; the daemon checks its Origin).
import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import "@xterm/xterm/css/xterm.css";
import { sbPath } from "../api";
import { el, append } from "../dom";

export function openTerminal(box: HTMLElement, id: string): () => void {
  const host = el("div", { class: "terminal", id: "terminal" });
  const state = el("p", { class: "hint", id: "terminal-state" }, "connecting…");
  append(box, host, state);
  const term = new Terminal({ cursorBlink: true, fontSize: 14, convertEol: false, scrollback: 2000 });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(host);
  fit.fit();
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const q = new URLSearchParams({ cols: String(term.cols), rows: String(term.rows) });
  const ws = new WebSocket(`${scheme}//${location.host}/console/v1${sbPath(id, "pty")}?${q}`);
  ws.binaryType = "arraybuffer";
  const enc = new TextEncoder();
  ws.onmessage = (m) => {
    if (typeof m.data === "string") {
      const msg = JSON.parse(m.data);
      if (msg.type === "started") state.textContent = "connected";
      else if (msg.type === "exit") state.textContent = `exited (${msg.exit_code ?? msg.signal})`;
      else if (msg.type === "error") state.textContent = "error: " + (msg.error?.message ?? "");
      return;
    }
    term.write(new Uint8Array(m.data));
  };
  ws.onclose = () => {
    if (state.textContent === "connecting…" || state.textContent === "connected") state.textContent = "disconnected";
  };
  const onData = term.onData((d) => ws.readyState === WebSocket.OPEN && ws.send(enc.encode(d)));
  const onResize = term.onResize(({ cols, rows }) => ws.readyState === WebSocket.OPEN && ws.send(JSON.stringify({ type: "resize", cols, rows })));
  const ro = new ResizeObserver(() => fit.fit());
  ro.observe(host);
  term.focus();
  return () => {
    ro.disconnect();
    onData.dispose();
    onResize.dispose();
    ws.close();
    term.dispose();
  };
}
