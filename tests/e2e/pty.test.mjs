// The terminal route: GET /v1/sandboxes/{id}/pty upgraded to a WebSocket
// (raw TCP client, tests/e2e/lib/ws.mjs) relays a login shell in a real
// VM. With a key in a header: input, output, resize, the exit code in the
// close frame. A ticket opens it once; a used, expired or forged one and
// another account's sandbox are refused; the caps answer 429 naming their
// setting; destroying the sandbox closes an open session.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startAasd, newAccount, vmEnv, sleep } from './lib/harness.mjs';
import { wsConnect } from './lib/ws.mjs';

const TICKET_TTL_S = 2;
let aasd;
let alice;
let bob;
let sbxA;
let sbxB;

async function rest(method, p, key, body) {
  const headers = { 'x-api-key': key };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch(`${aasd.url}${p}`, { method, headers,
    body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, json, text };
}

// Opens a terminal; a 429 right after another session closed (its threads
// end within a second) is retried for a while.
async function open(sbx, { key, bearer, ticket, query = '', retry = true } = {}) {
  const headers = {};
  if (key) headers['x-api-key'] = key;
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  const q = ticket ? `?ticket=${encodeURIComponent(ticket)}${query ? `&${query}` : ''}` :
    (query ? `?${query}` : '');
  const deadline = Date.now() + 10000;
  for (;;) {
    const r = await wsConnect(aasd.port, `/v1/sandboxes/${sbx}/pty${q}`, headers);
    if (r.status !== 429 || !retry || Date.now() > deadline) return r;
    await sleep(250);
  }
}

before(async () => {
  aasd = await startAasd(vmEnv('pty', {
    AAS_MAX_PTY: '2',
    AAS_MAX_PTY_PER_ACCOUNT: '1',
    AAS_PTY_TICKET_TTL_S: String(TICKET_TTL_S),
  }));
  alice = await newAccount();
  bob = await newAccount();
  const [a, b] = await Promise.all([
    rest('POST', '/v1/sandboxes', alice.api_key, { size: 'small', timeout_minutes: 20 }),
    rest('POST', '/v1/sandboxes', bob.api_key, { size: 'small', timeout_minutes: 20 }),
  ]);
  assert.equal(a.status, 201, a.text);
  assert.equal(b.status, 201, b.text);
  sbxA = a.json.sandbox_id;
  sbxB = b.json.sandbox_id;
});

after(async () => {
  if (sbxA) await rest('DELETE', `/v1/sandboxes/${sbxA}`, alice.api_key).catch(() => {});
  if (sbxB) await rest('DELETE', `/v1/sandboxes/${sbxB}`, bob.api_key).catch(() => {});
  await aasd?.stop();
});

test('a header key opens a shell: input, output, resize, and the exit code in the close', async () => {
  const r = await open(sbxA, { key: alice.api_key, query: 'rows=30&cols=90' });
  assert.equal(r.status, 101, r.head);
  assert.equal(r.accept, r.want);
  assert.match(r.head, /^connection:\s*upgrade\r?$/im);
  assert.match(r.head, /^upgrade:\s*websocket\r?$/im);
  const { ws } = r;
  ws.send('stty size\n');
  await ws.waitFor(/^30 90\r?$/m);
  ws.send(Buffer.from('echo $((6*7))\n'));
  await ws.waitFor(/^42\r?$/m);
  // Whoami: the sandbox user, in its home.
  ws.send('echo "$(id -un):$PWD"\n');
  await ws.waitFor(/^sandbox:\/home\/sandbox\r?$/m);
  ws.send(JSON.stringify({ type: 'resize', rows: 33, cols: 101 }));
  ws.send('stty size\n');
  await ws.waitFor(/^33 101\r?$/m);
  ws.send('exit 3\n');
  const c = await Promise.race([ws.closed, sleep(20000).then(() => null)]);
  assert.deepEqual(c, { code: 1000, reason: 'exit 3' });
});

test('Authorization: Bearer works too; a client close ends the shell', async () => {
  const r = await open(sbxA, { bearer: alice.api_key });
  assert.equal(r.status, 101, r.head);
  r.ws.send('echo $$ > /tmp/pty-shell.pid; echo ready-$((1+1))\n');
  await r.ws.waitFor(/ready-2/);
  r.ws.close(1000, 'bye');
  const c = await Promise.race([r.ws.closed, sleep(20000).then(() => null)]);
  assert.equal(c?.code, 1000);
  assert.equal(c?.reason, 'closed by the client');
  // That shell is gone (hung up), seen from the next one.
  const n = await open(sbxA, { key: alice.api_key });
  assert.equal(n.status, 101, n.head);
  n.ws.send('sleep 1; kill -0 $(cat /tmp/pty-shell.pid) 2>/dev/null && echo ALIVE-$((0+1)) || echo GONE-$((1+1))\n');
  const m = await n.ws.waitFor(/ALIVE-1|GONE-2/);
  assert.equal(m[0], 'GONE-2');
  n.ws.send('exit\n');
  assert.equal((await n.ws.closed).reason, 'exit 0');
});

test('a ticket opens the terminal once; used, expired or forged ones are refused', async () => {
  const t = await rest('POST', `/v1/sandboxes/${sbxA}/pty/ticket`, alice.api_key);
  assert.equal(t.status, 201, t.text);
  assert.equal(t.json.expires_in, TICKET_TTL_S);
  assert.equal(typeof t.json.ticket, 'string');
  const r = await open(sbxA, { ticket: t.json.ticket });
  assert.equal(r.status, 101, r.head);
  r.ws.send('echo $((6*7))\n');
  await r.ws.waitFor(/^42\r?$/m);
  r.ws.close();
  await r.ws.closed;
  // Not twice.
  const again = await open(sbxA, { ticket: t.json.ticket });
  assert.equal(again.status, 401, again.head);
  assert.equal(again.body.error.code, 'unauthorized');
  // Forged: another mac, another expiry.
  const t2 = await rest('POST', `/v1/sandboxes/${sbxA}/pty/ticket`, alice.api_key);
  const parts = t2.json.ticket.split('.');
  const flip = (s) => (s[0] === 'a' ? 'b' : 'a') + s.slice(1);
  for (const forged of [[parts[0], parts[1], flip(parts[2])].join('.'),
    [String(Number(parts[0]) + 3600), parts[1], parts[2]].join('.'), 'x', '']) {
    const f = await open(sbxA, { ticket: forged, retry: false });
    assert.equal(f.status, 401, `${forged}: ${f.head}`);
  }
  // The genuine one is for this sandbox only.
  const other = await open(sbxB, { ticket: t2.json.ticket, retry: false });
  assert.equal(other.status, 401, other.head);
  // Expired.
  const t3 = await rest('POST', `/v1/sandboxes/${sbxA}/pty/ticket`, alice.api_key);
  await sleep((TICKET_TTL_S + 1.5) * 1000);
  const old = await open(sbxA, { ticket: t3.json.ticket, retry: false });
  assert.equal(old.status, 401, old.head);
  // A ticket is not a key anywhere else.
  const asKey = await rest('GET', '/v1/sandboxes', t2.json.ticket);
  assert.equal(asKey.status, 401);
  const inQuery = await fetch(`${aasd.url}/v1/sandboxes?ticket=${encodeURIComponent(t2.json.ticket)}`);
  assert.equal(inQuery.status, 401);
});

test('another account\'s sandbox is not found; no credential is 401; no upgrade is 426', async () => {
  const r = await open(sbxA, { key: bob.api_key, retry: false });
  assert.equal(r.status, 404, r.head);
  assert.equal(r.body.error.field, 'sandbox_id');
  const t = await rest('POST', `/v1/sandboxes/${sbxA}/pty/ticket`, bob.api_key);
  assert.equal(t.status, 404, t.text);
  const anon = await open(sbxA, { retry: false });
  assert.equal(anon.status, 401, anon.head);
  const plain = await rest('GET', `/v1/sandboxes/${sbxA}/pty`, alice.api_key);
  assert.equal(plain.status, 426, plain.text);
});

test('the caps answer 429 naming their setting', async () => {
  const a1 = await open(sbxA, { key: alice.api_key });
  assert.equal(a1.status, 101, a1.head);
  const a2 = await open(sbxA, { key: alice.api_key, retry: false });
  assert.equal(a2.status, 429, a2.head);
  assert.match(a2.body.error.message, /AAS_MAX_PTY_PER_ACCOUNT/);
  const b1 = await open(sbxB, { key: bob.api_key });
  assert.equal(b1.status, 101, b1.head);
  const b2 = await open(sbxB, { key: bob.api_key, retry: false });
  assert.equal(b2.status, 429, b2.head);
  assert.match(b2.body.error.message, /AAS_MAX_PTY\b/);
  for (const s of [a1.ws, b1.ws]) {
    s.close();
    await s.closed;
  }
});

test('destroying the sandbox closes its open terminal', async () => {
  const r = await open(sbxA, { key: alice.api_key });
  assert.equal(r.status, 101, r.head);
  r.ws.send('echo up-$((2+2))\n');
  await r.ws.waitFor(/up-4/);
  const d = await rest('DELETE', `/v1/sandboxes/${sbxA}`, alice.api_key);
  assert.equal(d.status, 200, d.text);
  const c = await Promise.race([r.ws.closed, sleep(30000).then(() => null)]);
  assert.ok(c, 'the session closed');
  assert.equal(c.code, 1001);
  assert.equal(c.reason, 'sandbox ended');
  sbxA = null;
});
