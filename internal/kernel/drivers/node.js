// Paddock JavaScript kernel driver: run by the guest agent as
// `node --expose-internals -e` (the internals give the REPL's top-level
// await rewrite). fd 3: requests, one JSON object per line; fd 4: events.
// Before each cell: {"type":"started"} on fd 4. After each cell: the marker on fd 1 and fd 2, then {"type":"done"} on fd 4.
'use strict';
const fs = require('fs');
const util = require('util');
const vm = require('vm');
const marker = process.env.PADDOCK_KERNEL_MARKER || '';
const maxItem = Number(process.env.PADDOCK_KERNEL_MAX_ITEM || 8388608);
delete process.env.PADDOCK_KERNEL_MARKER;
delete process.env.PADDOCK_KERNEL_MAX_ITEM;
let rewriteAwait = null;
try { rewriteAwait = require('internal/repl/await').processTopLevelAwait; } catch (_) { /* no top-level await */ }
globalThis.require = require;

function send(obj) {
  const buf = Buffer.from(JSON.stringify(obj) + '\n');
  let off = 0;
  while (off < buf.length) off += fs.writeSync(4, buf, off);
}

function bundle(v) {
  const data = {};
  if (v && typeof v === 'object' && typeof v._repr_mimebundle_ === 'function') {
    try { Object.assign(data, v._repr_mimebundle_()); } catch (_) { /* plain text only */ }
  }
  if (!('text/plain' in data)) data['text/plain'] = util.inspect(v, { depth: 4, maxArrayLength: 200 });
  const out = {}; const omitted = {};
  for (const [k, x] of Object.entries(data)) {
    const t = typeof x === 'string' ? x : JSON.stringify(x);
    if (t.length > maxItem) omitted[k] = t.length; else out[k] = t;
  }
  const r = { data: out };
  if (Object.keys(omitted).length) r.omitted = omitted;
  return r;
}

globalThis.display = (...objs) => { for (const o of objs) send({ type: 'result', result: bundle(o) }); };

let interrupt = null; // rejects the running cell's wait on SIGINT
process.on('SIGINT', () => { if (interrupt) interrupt(); });

function errorOf(e) {
  if (e instanceof Error || (e && typeof e === 'object' && 'stack' in e)) {
    return { name: String(e.name || 'Error'), value: String(e.message || ''), traceback: String(e.stack || '') };
  }
  return { name: 'Error', value: util.inspect(e), traceback: '' };
}

async function run(code, count) {
  const filename = `<cell-${count}>`;
  let wrapped = null;
  if (rewriteAwait && code.includes('await')) {
    try { wrapped = rewriteAwait(code); } catch (_) { wrapped = null; }
  }
  let value;
  if (wrapped) {
    const p = vm.runInThisContext(wrapped, { filename, breakOnSigint: true });
    const stop = new Promise((_, reject) => { interrupt = () => reject(Object.assign(new Error('interrupted'), { name: 'KeyboardInterrupt' })); });
    const r = await Promise.race([p, stop]);
    value = r ? r.value : undefined;
  } else {
    value = vm.runInThisContext(code, { filename, breakOnSigint: true });
  }
  if (value !== undefined) {
    globalThis._ = value;
    send({ type: 'result', result: Object.assign(bundle(value), { is_main_result: true }) });
  }
}

function finish(count) {
  for (const fd of [1, 2]) { try { fs.writeSync(fd, marker); } catch (_) { /* closed */ } }
  send({ type: 'done', execution_count: count });
}

async function main() {
  let count = 0;
  let pending = '';
  const queue = [];
  let wake = null;
  const input = fs.createReadStream(null, { fd: 3 });
  input.on('data', (chunk) => {
    pending += chunk.toString('utf8');
    let i;
    while ((i = pending.indexOf('\n')) >= 0) { queue.push(pending.slice(0, i)); pending = pending.slice(i + 1); }
    if (wake) { wake(); wake = null; }
  });
  input.on('end', () => process.exit(0));
  for (;;) {
    while (queue.length === 0) await new Promise((r) => { wake = r; });
    const line = queue.shift();
    count++;
    try {
      const req = JSON.parse(line);
      Object.assign(process.env, req.env || {});
      send({ type: 'started' });
      await run(String(req.code || ''), count);
    } catch (e) {
      let err = errorOf(e);
      if (/interrupted by `SIGINT`/.test(err.value)) err = { name: 'KeyboardInterrupt', value: err.value, traceback: '' };
      send({ type: 'error', error: err });
    }
    interrupt = null;
    finish(count);
  }
}

process.on('uncaughtException', (e) => { try { send({ type: 'stderr', text: `uncaught: ${errorOf(e).traceback || errorOf(e).value}\n` }); } catch (_) { /* gone */ } });
process.on('unhandledRejection', (e) => { try { send({ type: 'stderr', text: `unhandled rejection: ${errorOf(e).value}\n` }); } catch (_) { /* gone */ } });
main();
