// Per-tenant bounds at the HTTP edge: GET streams per session and per
// account, and request bodies that are never read before the key is known.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import {
  startAasd, newAccount, aasctl, post, openSession, initializeBody, PROTOCOL, sleep,
} from './lib/harness.mjs';

const PER_SESSION = 2;
const PER_ACCOUNT = 3;
const MiB = 1024 * 1024;

let aasd;
let alice;
let bob;
const open = []; // AbortControllers of streams still open

before(async () => {
  aasd = await startAasd({
    AAS_MAX_STREAMS_PER_SESSION: String(PER_SESSION),
    AAS_MAX_STREAMS_PER_ACCOUNT: String(PER_ACCOUNT),
    // A client that went away is noticed at the next keep-alive.
    AAS_SSE_KEEPALIVE_S: '1',
    // Large enough that a 40 MiB body is not refused for its length alone.
    AAS_MAX_BODY_BYTES: String(64 * MiB),
  });
  alice = await newAccount();
  bob = await newAccount();
});
after(async () => {
  for (const c of open) c.abort();
  await aasd?.stop();
});

// ---- streams ----

async function getStream(sid, key) {
  const ctrl = new AbortController();
  const headers = { Accept: 'text/event-stream', 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL };
  if (key) headers['x-api-key'] = key;
  const r = await fetch(aasd.mcpUrl, { headers, signal: ctrl.signal });
  if (r.status === 200) {
    // Left unread (keep-alives are small); abort() ends it.
    open.push(ctrl);
    return { status: 200, ctrl, headers: r.headers };
  }
  const json = await r.json();
  return { status: r.status, json, headers: r.headers };
}

function assertCapped(r, setting) {
  assert.equal(r.status, 429, JSON.stringify(r.json));
  assert.equal(r.headers.get('retry-after'), '5');
  assert.equal(r.json.jsonrpc, '2.0');
  assert.equal(r.json.error.code, -32000);
  assert.match(r.json.error.message, new RegExp(setting));
}

// Retries a GET until it is let through (a closed stream's slot comes
// back once aasd notices, within a keep-alive period).
async function getStreamEventually(sid, key) {
  const t0 = Date.now();
  for (;;) {
    const r = await getStream(sid, key);
    if (r.status === 200 || Date.now() - t0 > 5000) return r;
    await sleep(200);
  }
}

test('GET streams are capped per session and per account, and a closed one frees its slot', async () => {
  const h = { 'x-api-key': alice.api_key };
  const s1 = await openSession(aasd.mcpUrl, h);
  const s2 = await openSession(aasd.mcpUrl, h);
  const first = await getStream(s1, alice.api_key);
  assert.equal(first.status, 200);
  assert.equal((await getStream(s1, alice.api_key)).status, 200);
  assertCapped(await getStream(s1, alice.api_key), 'AAS_MAX_STREAMS_PER_SESSION');

  // The account has one slot left, taken from another session.
  assert.equal((await getStream(s2, alice.api_key)).status, 200);
  assertCapped(await getStream(s2, alice.api_key), 'AAS_MAX_STREAMS_PER_ACCOUNT');

  // Another account is not affected.
  const b = await openSession(aasd.mcpUrl, { 'x-api-key': bob.api_key });
  assert.equal((await getStream(b, bob.api_key)).status, 200);

  // The client goes away: its slot comes back (taken from a third session,
  // so that only the account's cap is in the way).
  const s3 = await openSession(aasd.mcpUrl, h);
  first.ctrl.abort();
  const again = await getStreamEventually(s3, alice.api_key);
  assert.equal(again.status, 200, 'the slot of a closed stream is given back');
  assertCapped(await getStream(s3, alice.api_key), 'AAS_MAX_STREAMS_PER_ACCOUNT');

  // Deleting a session ends its streams and gives their slots back.
  const d = await fetch(aasd.mcpUrl, { method: 'DELETE', headers: { 'Mcp-Session-Id': s1, ...h } });
  assert.equal(d.status, 200);
  assert.equal((await getStreamEventually(s3, alice.api_key)).status, 200);
  assertCapped(await getStream(s3, alice.api_key), 'AAS_MAX_STREAMS_PER_SESSION');
});

test('streams without a key count per session and under one shared anonymous allowance', async () => {
  const a1 = await openSession(aasd.mcpUrl);
  const a2 = await openSession(aasd.mcpUrl);
  assert.equal((await getStream(a1)).status, 200);
  assert.equal((await getStream(a1)).status, 200);
  assertCapped(await getStream(a1), 'AAS_MAX_STREAMS_PER_SESSION');
  assert.equal((await getStream(a2)).status, 200);
  const r = await getStream(a2);
  assertCapped(r, 'AAS_MAX_STREAMS_PER_ACCOUNT');
  assert.match(r.json.error.message, /without an API key/);
});

// ---- bodies before keys ----

// Sends a request head announcing `total` body bytes and the first 16 KiB
// of them, then waits a moment for an answer (a server that decides from
// the headers answers now, having read no body); with none, sends the
// rest, 64 KiB at a time, stopping as soon as the answer arrives. Returns
// the status, the body bytes handed to the socket by then, and the time it
// took. (Writing on while the server closes would lose its answer to EPIPE.)
function rawRequest({ method = 'POST', path, headers = {}, total }) {
  return new Promise((resolve) => {
    const sock = net.connect(aasd.port, '127.0.0.1');
    const t0 = Date.now();
    let sent = 0;
    let sentAtAnswer = -1;
    let answer = '';
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      const status = Number((/^HTTP\/1\.[01] (\d{3})/.exec(answer) || [])[1] || 0);
      const body = answer.split('\r\n\r\n').slice(1).join('\r\n\r\n');
      sock.destroy();
      resolve({ status, sentAtAnswer: sentAtAnswer < 0 ? sent : sentAtAnswer, ms: Date.now() - t0, body });
    };
    const answered = () => sentAtAnswer >= 0 || done;
    // Resolves on drain, an answer, or after `ms` (0: no time limit).
    const wait = (ms, drain) => new Promise((r) => {
      const t1 = Date.now();
      const t = setInterval(() => {
        if (answered() || (ms && Date.now() - t1 >= ms)) { clearInterval(t); r(); }
      }, 10);
      if (drain) sock.once('drain', () => { clearInterval(t); r(); });
    });
    sock.on('data', (d) => {
      if (sentAtAnswer < 0) sentAtAnswer = sent;
      answer += d.toString('latin1');
      if (/\r\n\r\n/.test(answer)) {
        const m = /content-length: *(\d+)/i.exec(answer);
        const head = answer.indexOf('\r\n\r\n') + 4;
        if (m && answer.length - head >= Number(m[1])) finish();
      }
    });
    sock.on('error', () => {});
    sock.on('close', finish);
    sock.on('connect', async () => {
      const lines = [`${method} ${path} HTTP/1.1`, `Host: 127.0.0.1:${aasd.port}`,
        `Content-Length: ${total}`, 'Content-Type: application/json',
        'Accept: application/json, text/event-stream'];
      for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
      sock.write(`${lines.join('\r\n')}\r\n\r\n`);
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      const send = async (upto) => {
        while (sent < upto && !answered()) {
          const n = Math.min(chunk.length, upto - sent);
          const ok = sock.write(n === chunk.length ? chunk : chunk.subarray(0, n));
          sent += n;
          if (!ok) await wait(0, true);
        }
      };
      await send(Math.min(16 * 1024, total));
      await wait(1000, false);
      await send(total);
    });
  });
}

// A key of the right form that no account has: checking it needs the database.
const unknownKey = () => `aas_sk_${randomBytes(32).toString('base64url')}`;

function vmRssKiB(pid) {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
}

test('a bad key gets 401 before its body is read (REST and MCP)', async () => {
  const total = 40 * MiB;
  const cases = [
    { path: '/v1/sandboxes', headers: { 'x-api-key': unknownKey() } },
    { path: '/v1/sandboxes', headers: { Authorization: 'Bearer not-a-key' } },
    { path: '/v1/sandboxes', headers: {} },
    { path: '/v1/mcp', headers: { 'x-api-key': unknownKey() } },
    { path: '/v1/mcp', headers: { Authorization: 'Basic abc' } },
  ];
  for (const c of cases) {
    const r = await rawRequest({ path: c.path, headers: c.headers, total });
    assert.equal(r.status, 401, `${c.path} ${JSON.stringify(c.headers)}: ${r.body}`);
    assert.ok(r.sentAtAnswer < total / 2,
      `${c.path}: answered after ${r.sentAtAnswer} of ${total} body bytes were sent`);
    assert.ok(r.ms < 5000, `${c.path}: answered after ${r.ms} ms`);
  }
  // A revoked key too.
  const gone = await newAccount();
  await aasctl('key', 'revoke', '--key', gone.key_id);
  const r = await rawRequest({ path: '/v1/mcp', headers: { 'x-api-key': gone.api_key }, total });
  assert.equal(r.status, 401);
  assert.ok(r.sentAtAnswer < total / 2);
});

test('an anonymous MCP body is small: 413 naming AAS_MAX_ANON_BODY_BYTES, before it is read', async () => {
  const r = await rawRequest({ path: '/v1/mcp', total: 8 * MiB });
  assert.equal(r.status, 413);
  assert.match(JSON.parse(r.body).error.message, /AAS_MAX_ANON_BODY_BYTES/);
  assert.ok(r.sentAtAnswer < 4 * MiB);
  // A body just under the limit is read and answered.
  const body = initializeBody(1);
  body.params.clientInfo.pad = 'x'.repeat(60000);
  const ok = await post(aasd.mcpUrl, body);
  assert.equal(ok.status, 200);
});

test('a good key not yet cached is looked up first, then the body is read in full', async () => {
  const fresh = await newAccount();
  const body = initializeBody(1);
  body.params.clientInfo.pad = 'x'.repeat(2 * MiB); // beyond the anonymous limit
  const r = await post(aasd.mcpUrl, body, { 'x-api-key': fresh.api_key });
  assert.equal(r.status, 200, r.text);
  assert.match(r.headers.get('mcp-session-id'), /^[0-9a-f]{64}$/);
  // And on REST, through the suspended lookup: the operation sees the body.
  const other = await newAccount();
  const rr = await fetch(`${aasd.url}/v1/sandboxes`, {
    method: 'POST', headers: { 'x-api-key': other.api_key, 'Content-Type': 'application/json' },
    body: '{"size": 7}' });
  assert.notEqual(rr.status, 401);
  assert.notEqual(rr.status, 413);
});

test('many strangers sending huge bodies do not grow aasd', async () => {
  const N = 8;
  const total = 40 * MiB;
  const before = vmRssKiB(aasd.proc.pid);
  const rs = await Promise.all(Array.from({ length: N }, (_, i) => rawRequest({
    path: i % 2 ? '/v1/mcp' : '/v1/sandboxes', headers: { 'x-api-key': unknownKey() }, total })));
  const afterRss = vmRssKiB(aasd.proc.pid);
  for (const r of rs) {
    assert.equal(r.status, 401);
    assert.ok(r.sentAtAnswer < total / 2);
  }
  // Buffering them would take N * 40 MiB; a generous bound well below.
  assert.ok(afterRss - before < 48 * 1024,
    `aasd grew from ${before} KiB to ${afterRss} KiB serving ${N} refused ${total}-byte bodies`);
});
