// A small RFC 6455 WebSocket client over node:http, for terminals. Node 20
// has no global WebSocket (and the standard one cannot send the
// Authorization header), so the SDK carries this one instead of a
// dependency: masked frames out, frames in with fragments joined, pings
// answered, every message bounded and at most MAX_QUEUED messages held
// before the socket is paused.

import { createHash, randomBytes } from "node:crypto";
import type { Socket } from "node:net";

import { ConnectionError, errorFromBody } from "./errors.js";

/** The longest message accepted (the daemon sends at most 32 KiB of output per message). */
export const MAX_MESSAGE = 1 << 20;
/** Messages read ahead of the caller before the socket is paused. */
const MAX_QUEUED = 64;
/** The most read of a refused upgrade's body. */
const MAX_ERROR_BODY = 64 << 10;
const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

export const OP_TEXT = 1;
export const OP_BINARY = 2;
export const OP_CLOSE = 8;
const OP_PING = 9;
const OP_PONG = 10;

/** One message: text, binary, or the peer's close (with its code). */
export interface Message {
  opcode: number;
  data: Uint8Array;
  code?: number;
}

/** Encodes one final, masked frame. */
export function frame(opcode: number, payload: Uint8Array): Uint8Array {
  const n = payload.byteLength;
  const ext = n < 126 ? 0 : n < 65536 ? 2 : 8;
  const out = new Uint8Array(2 + ext + 4 + n);
  out[0] = 0x80 | opcode;
  out[1] = 0x80 | (ext === 0 ? n : ext === 2 ? 126 : 127);
  const dv = new DataView(out.buffer);
  if (ext === 2) dv.setUint16(2, n);
  if (ext === 8) dv.setBigUint64(2, BigInt(n));
  const mask = randomBytes(4);
  out.set(mask, 2 + ext);
  for (let i = 0; i < n; i++) out[2 + ext + 4 + i] = payload[i]! ^ mask[i % 4]!;
  return out;
}

/** A connected WebSocket. */
export class WSConn {
  #sock: Socket;
  #buf: Buffer = Buffer.alloc(0);
  #parts: Buffer[] = [];
  #first = -1;
  #queue: Message[] = [];
  #waiters: Array<{ resolve: (m: Message) => void; reject: (e: unknown) => void }> = [];
  #err: unknown;

  constructor(sock: Socket, head: Buffer) {
    this.#sock = sock;
    sock.setNoDelay(true);
    sock.on("data", (d: Buffer) => this.#onData(d));
    sock.on("error", (e) => this.#fail(new ConnectionError(`terminal: ${e.message}`, { cause: e })));
    sock.on("close", () => this.#fail(new ConnectionError("terminal: the connection closed")));
    if (head.byteLength) this.#onData(head);
  }

  #fail(e: unknown): void {
    if (this.#err === undefined) this.#err = e;
    for (const w of this.#waiters.splice(0)) w.reject(this.#err);
  }

  #push(m: Message): void {
    const w = this.#waiters.shift();
    if (w) return w.resolve(m);
    this.#queue.push(m);
    if (this.#queue.length >= MAX_QUEUED) this.#sock.pause();
  }

  #onData(d: Buffer): void {
    this.#buf = this.#buf.byteLength ? Buffer.concat([this.#buf, d]) : d;
    try {
      while (this.#parse());
    } catch (e) {
      this.#fail(e);
      this.#sock.destroy();
    }
  }

  /** Parses one frame from the buffer; false when it is incomplete. */
  #parse(): boolean {
    const b = this.#buf;
    if (b.byteLength < 2) return false;
    const b0 = b[0]!;
    const b1 = b[1]!;
    if (b1 & 0x80) throw new ConnectionError("terminal: the daemon sent a masked frame");
    let n = b1 & 0x7f;
    let off = 2;
    if (n === 126) {
      if (b.byteLength < 4) return false;
      n = b.readUInt16BE(2);
      off = 4;
    } else if (n === 127) {
      if (b.byteLength < 10) return false;
      const big = b.readBigUInt64BE(2);
      if (big > BigInt(MAX_MESSAGE)) throw new ConnectionError(`terminal: message larger than ${MAX_MESSAGE} bytes`);
      n = Number(big);
      off = 10;
    }
    const held = this.#parts.reduce((s, p) => s + p.byteLength, 0);
    if (n + held > MAX_MESSAGE) throw new ConnectionError(`terminal: message larger than ${MAX_MESSAGE} bytes`);
    if (b.byteLength < off + n) return false;
    const payload = Buffer.from(b.subarray(off, off + n));
    this.#buf = b.subarray(off + n);
    const opcode = b0 & 0x0f;
    if (opcode === OP_PING) {
      this.#sock.write(frame(OP_PONG, payload));
    } else if (opcode === OP_CLOSE) {
      const code = payload.byteLength >= 2 ? payload.readUInt16BE(0) : 1005;
      this.#push({ opcode: OP_CLOSE, data: payload.subarray(2), code });
    } else if (opcode !== OP_PONG) {
      if (this.#first < 0) this.#first = opcode;
      this.#parts.push(payload);
      if (b0 & 0x80) {
        const m = { opcode: this.#first, data: new Uint8Array(Buffer.concat(this.#parts)) };
        this.#parts = [];
        this.#first = -1;
        this.#push(m);
      }
    }
    return true;
  }

  /** The next message. */
  read(): Promise<Message> {
    const m = this.#queue.shift();
    if (m) {
      if (this.#queue.length < MAX_QUEUED / 2) this.#sock.resume();
      return Promise.resolve(m);
    }
    if (this.#err !== undefined) return Promise.reject(this.#err);
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  /** Sends a message; resolves once the socket took it. */
  send(opcode: number, data: Uint8Array): Promise<void> {
    if (this.#err !== undefined) return Promise.reject(this.#err);
    return new Promise((resolve, reject) => {
      this.#sock.write(frame(opcode, data), (e) => (e ? reject(new ConnectionError(`terminal: ${e.message}`, { cause: e })) : resolve()));
    });
  }

  /** Sends a close frame and ends the connection. */
  close(code = 1000): void {
    if (!this.#sock.destroyed) {
      const p = new Uint8Array(2);
      new DataView(p.buffer).setUint16(0, code);
      this.#sock.end(frame(OP_CLOSE, p));
      setTimeout(() => this.#sock.destroy(), 2000).unref();
    }
  }
}

/** Opens a WebSocket to url (http: or https:) with headers; an API error answer rejects with its PaddockError. */
export async function connect(url: string, headers: Record<string, string>, timeoutMs: number, signal?: AbortSignal): Promise<WSConn> {
  const u = new URL(url);
  const mod = u.protocol === "https:" ? await import("node:https") : await import("node:http");
  const key = randomBytes(16).toString("base64");
  const accept = createHash("sha1").update(key + GUID).digest("base64");
  return new Promise<WSConn>((resolve, reject) => {
    const req = mod.request(u, {
      method: "GET",
      headers: { ...headers, Connection: "Upgrade", Upgrade: "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": key },
      signal,
      timeout: timeoutMs > 0 ? timeoutMs : undefined,
    });
    req.on("timeout", () => req.destroy(new ConnectionError(`terminal: no answer within ${timeoutMs} ms`)));
    req.on("error", (e) => reject(e instanceof ConnectionError ? e : new ConnectionError(`terminal: ${e.message}`, { cause: e })));
    req.on("upgrade", (res, sock: Socket, head: Buffer) => {
      if (res.headers["sec-websocket-accept"] !== accept) {
        sock.destroy();
        return reject(new ConnectionError("terminal: the daemon's WebSocket answer does not match the key"));
      }
      sock.setTimeout(0);
      resolve(new WSConn(sock, head));
    });
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      let n = 0;
      res.on("data", (c: Buffer) => {
        if (n < MAX_ERROR_BODY) chunks.push(c);
        n += c.byteLength;
      });
      res.on("end", () => reject(errorFromBody(res.statusCode ?? 0, res.statusMessage ?? "", Buffer.concat(chunks).subarray(0, MAX_ERROR_BODY).toString("utf8"))));
      res.on("error", (e) => reject(new ConnectionError(`terminal: ${e.message}`, { cause: e })));
    });
    req.end();
  });
}
