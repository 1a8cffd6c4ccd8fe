// Slow and greedy clients at the HTTP edge: connections per client address
// (AAS_MAX_CONNS_PER_ADDR), the time a request may take to arrive however
// slowly its bytes come (AAS_REQUEST_RECV_S), body limits by route
// (AAS_MAX_JSON_BODY_BYTES) and body bytes held at once per account
// (AAS_MAX_BODY_BUFFER_PER_ACCOUNT). Two loopback addresses stand for two
// clients: 127.0.0.2 misbehaves, 127.0.0.1 is served meanwhile.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { startAasd, newAccount, initializeBody, JSON_HEADERS, sleep, waitFor } from './lib/harness.mjs';

const PER_ADDR = 16;   // AAS_MAX_CONNS_PER_ADDR
const RECV_S = 3;      // AAS_REQUEST_RECV_S
const MiB = 1024 * 1024;
const BUDGET = 32 * MiB; // AAS_MAX_BODY_BUFFER_PER_ACCOUNT

let aasd;
let acct;
const socks = [];

before(async () => {
  aasd = await startAasd({
    AAS_MAX_CONNS_PER_ADDR: String(PER_ADDR),
    AAS_REQUEST_RECV_S: String(RECV_S),
    AAS_MAX_BODY_BUFFER_PER_ACCOUNT: String(BUDGET),
  });
  acct = await newAccount();
});

after(async () => {
  for (const s of socks) s.destroy();
  await aasd?.stop();
});

// A raw connection from `from`; resolves once connected. `closed` resolves
// with the ms from connect to close, `data` collects what came back.
function connect(from) {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port: aasd.port, localAddress: from });
    socks.push(s);
    const c = { sock: s, data: '', closedAt: 0 };
    c.closed = new Promise((r) => s.on('close', () => { c.closedAt = Date.now(); r(Date.now() - c.t0); }));
    s.on('data', (d) => { c.data += d.toString('latin1'); });
    s.on('error', () => {});
    s.once('connect', () => { c.t0 = Date.now(); resolve(c); });
    s.once('error', reject);
  });
}

// Sends `text` a byte every `ms` until the socket closes or the text ends.
async function dribble(c, text, ms) {
  for (const ch of text) {
    if (c.closedAt || c.sock.destroyed) return;
    c.sock.write(ch);
    await sleep(ms);
  }
}

// Resolves with true when `p` settles within `ms`, else false.
const within = (p, ms) => Promise.race([p.then(() => true), sleep(ms).then(() => false)]);

async function pingFrom(from) {
  const c = await connect(from);
  const body = JSON.stringify(initializeBody(1));
  c.sock.write(`POST /v1/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
    `Accept: application/json, text/event-stream\r\nConnection: close\r\n` +
    `Content-Length: ${body.length}\r\n\r\n${body}`);
  await c.closed;
  return Number((/^HTTP\/1\.1 (\d{3})/.exec(c.data) || [])[1] || 0);
}

const HEAD = 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow\r\nX-Pad: ' +
  'x'.repeat(200) + '\r\n\r\n';

test('one address over AAS_MAX_CONNS_PER_ADDR is refused, slow heads are cut off, another address is served', async () => {
  // 127.0.0.2 opens its whole share and dribbles a head on each.
  const slow = [];
  for (let i = 0; i < PER_ADDR; i++) slow.push(await connect('127.0.0.2'));
  const dribbling = slow.map((c) => dribble(c, HEAD, 250));
  // One more from it is closed at once, with nothing said.
  const extra = await connect('127.0.0.2');
  assert.ok(await within(extra.closed, 2000), 'a connection over the per-address limit stayed open');
  assert.equal(extra.data, '');
  // Another address is served meanwhile, on /v1/mcp and /healthz.
  assert.equal(await pingFrom('127.0.0.1'), 200);
  const h = await fetch(`${aasd.url}/healthz`);
  assert.equal(h.status, 200);
  // The dribbled heads are cut off once AAS_REQUEST_RECV_S passed, though
  // a byte came every 250 ms (the idle timeout alone never closes them).
  const ms = await Promise.all(slow.map((c) => c.closed));
  await Promise.all(dribbling);
  for (const t of ms) {
    assert.ok(t >= RECV_S * 1000 - 100 && t < RECV_S * 1000 + 3000, `a slow head closed after ${t} ms`);
  }
  for (const c of slow) assert.ok(!/^HTTP\/1\.1 200/.test(c.data), 'a slow head was answered');
  // Its share is free again.
  await waitFor('127.0.0.2 let in again', async () => (await pingFrom('127.0.0.2')) === 200, 5000);
});

test('a body dribbled slower than AAS_REQUEST_RECV_S allows is cut off', async () => {
  const c = await connect('127.0.0.2');
  const body = JSON.stringify(initializeBody(1));
  c.sock.write(`POST /v1/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ${acct.api_key}\r\n` +
    `Content-Type: ${JSON_HEADERS['Content-Type']}\r\nAccept: ${JSON_HEADERS.Accept}\r\n` +
    `Content-Length: ${body.length}\r\n\r\n`);
  const feeding = dribble(c, body, 250);
  const t = await c.closed;
  await feeding;
  assert.ok(t >= RECV_S * 1000 - 100 && t < RECV_S * 1000 + 3000, `closed after ${t} ms`);
  assert.equal(c.data, '');
});

// Sends a head with Content-Length `total` and `send` bytes of body;
// resolves with the connection once they are written or an answer came.
async function bigBody(from, path, total, send, key) {
  const c = await connect(from);
  c.sock.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ${key}\r\n` +
    `Content-Type: application/json\r\nAccept: ${JSON_HEADERS.Accept}\r\n` +
    `Content-Length: ${total}\r\n\r\n`);
  const chunk = Buffer.alloc(256 * 1024, 0x20);
  for (let sent = 0; sent < send && !c.data && !c.closedAt;) {
    const n = Math.min(chunk.length, send - sent);
    const ok = c.sock.write(chunk.subarray(0, n));
    sent += n;
    if (!ok) await Promise.race([new Promise((r) => c.sock.once('drain', r)), c.closed, sleep(2000)]);
  }
  return c;
}

const status = (c) => Number((/^HTTP\/1\.1 (\d{3})/.exec(c.data) || [])[1] || 0);

test('a JSON body over AAS_MAX_JSON_BODY_BYTES is refused with 413 before it is read', async () => {
  const c = await bigBody('127.0.0.1', '/v1/sandboxes', 5 * MiB, 0, acct.api_key);
  await waitFor('an answer', async () => c.data.includes('\r\n\r\n'), 5000);
  assert.equal(status(c), 413);
  assert.match(c.data, /AAS_MAX_JSON_BODY_BYTES/);
  c.sock.destroy();
});

function vmRssKiB(pid) {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
}

test('one account sending many large bodies at once holds at most AAS_MAX_BODY_BUFFER_PER_ACCOUNT', async () => {
  const N = 12;
  const total = 12 * MiB;
  const base = vmRssKiB(aasd.proc.pid);
  let peak = base;
  const sampler = setInterval(() => { peak = Math.max(peak, vmRssKiB(aasd.proc.pid)); }, 20);
  // All but the last byte of each, so every one is held at once.
  const cs = await Promise.all(Array.from({ length: N }, () =>
    bigBody('127.0.0.1', '/v1/mcp', total, total - 1, acct.api_key)));
  await sleep(500); // the last bytes written reach aasd
  clearInterval(sampler);
  peak = Math.max(peak, vmRssKiB(aasd.proc.pid));
  // A refused one is answered 413 and closed (the answer may be lost to
  // the reset of a close with the body unread); a held one is still open.
  const refused = cs.filter((c) => c.data || c.closedAt);
  for (const c of refused.filter((r) => r.data)) {
    assert.equal(status(c), 413);
    assert.match(c.data, /AAS_MAX_BODY_BUFFER_PER_ACCOUNT/);
  }
  const held = N - refused.length;
  console.log(`${N} bodies of ${total / MiB} MiB from one account: ${held} held, ${refused.length} refused; ` +
    `aasd RSS ${Math.round(base / 1024)} MiB before, ${Math.round(peak / 1024)} MiB at the peak`);
  assert.ok(held * total <= BUDGET, `${held} bodies held`);
  assert.ok(refused.length >= N - Math.floor(BUDGET / total));
  assert.ok(peak - base < (BUDGET + 16 * MiB) / 1024,
    `aasd grew from ${base} KiB to ${peak} KiB with ${N} bodies of ${total} bytes in flight`);
  for (const c of cs) c.sock.destroy();
  // Once they are gone, the account's budget is whole again.
  await waitFor('the budget back', async () => {
    const two = [await bigBody('127.0.0.1', '/v1/mcp', total, 0, acct.api_key),
      await bigBody('127.0.0.1', '/v1/mcp', total, 0, acct.api_key)];
    await sleep(300);
    const ok = two.every((c) => !c.data);
    for (const c of two) c.sock.destroy();
    return ok;
  }, 5000);
});
