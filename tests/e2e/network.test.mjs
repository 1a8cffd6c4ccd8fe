// Sandbox networking, isolation and preview URLs, with real VMs (TCG).
// Traffic goes only to loopback and to a network namespace made here
// (a /24 inside 10.99.0.0/17 that no host interface uses yet) that stands
// in for the internet; tests/net-safety.sh drops anything else QEMU sends.
// The namespace, the veth pair and the subnet are named after this
// process, so two runs on one machine do not meet.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, createHmac } from 'node:crypto';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import net from 'node:net';
import http from 'node:http';
import { readFileSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startAasd, newAccount, vmEnv, STATE, sleep, DB_URL } from './lib/harness.mjs';
import { makeNetns } from './lib/netns.mjs';
import { wsEcho, WS_ECHO_SERVER } from './lib/ws.mjs';

const run = promisify(execFile);
const NS_PORT = 8080;
let net4;       // the stand-in internet (lib/netns.mjs)
let NS;
let NS_PEER;

let aasd;
let alice;
let bob;
let a;
let b;
let sbx;        // alice's, internet: true
let closed;     // alice's, internet: false
let hostListener;
let nsServer;

async function connect(key) {
  const transport = new StreamableHTTPClientTransport(new URL(aasd.mcpUrl),
    { requestInit: { headers: { 'x-api-key': key } } });
  const client = new Client({ name: 'aas-net-e2e', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

async function call(client, name, args) {
  return client.callTool({ name, arguments: args }, undefined, { timeout: 300000 });
}

async function ok(client, name, args) {
  const r = await call(client, name, args);
  assert.ok(!r.isError, `${name}: ${r.content?.[0]?.text}`);
  return r.structuredContent;
}

// Background servers live for the whole file; foreground commands are short.
async function sh(id, command, extra = {}) {
  return ok(a, 'run_command', { sandbox_id: id, command, timeout_seconds: extra.background ? 3600 : 60, ...extra });
}

function previewHost(id, port) {
  return `${port}-${id}.localhost:${aasd.port}`;
}

// curl through aasd with a preview Host header: { status, headers, body }.
async function curl(id, port, urlPath, extra = []) {
  const { stdout } = await run('curl', ['-sS', '-i', '--max-time', '60',
    '-H', `Host: ${previewHost(id, port)}`, ...extra, `${aasd.url}${urlPath}`],
  { encoding: 'buffer', maxBuffer: 64 << 20 });
  let rest = stdout;
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    const head = rest.subarray(0, end).toString();
    const status = Number(head.split(' ')[1]);
    rest = rest.subarray(end + 4);
    if (status !== 100) return { status, head, body: rest };   // skip "100 Continue"
  }
}

async function until(fn, ms = 60000) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`condition not met in time (${last?.message ?? 'no error'})`);
    await sleep(500);
  }
}

before(async () => {
  // The stand-in internet: a namespace on a veth pair with a listener.
  net4 = await makeNetns('inet');
  NS = net4.ns;
  NS_PEER = net4.peer;
  nsServer = net4.spawn([process.execPath, '-e',
    `require('http').createServer((q, s) => s.end('internet-ok')).listen(${NS_PORT}, '${NS_PEER}')`]);
  // A service on the host's loopback that guests must not reach.
  hostListener = net.createServer((c) => { c.end('host-secret\n'); });
  await new Promise((r) => hostListener.listen(0, '127.0.0.1', r));

  aasd = await startAasd(vmEnv('net', {
    AAS_PREVIEW_SIGNED_TTL_S: '600',
    AAS_MAX_PREVIEW_CONNS_PER_SANDBOX: '3',
    AAS_MAX_PREVIEW_CONNS_PER_ACCOUNT: '4',
  }));
  alice = await newAccount();
  bob = await newAccount();
  a = await connect(alice.api_key);
  b = await connect(bob.api_key);
  const [x, y] = await Promise.all([
    ok(a, 'create_sandbox', { timeout_minutes: 30 }),
    ok(a, 'create_sandbox', { timeout_minutes: 30, internet: false }),
  ]);
  sbx = x.sandbox_id;
  closed = y.sandbox_id;
  assert.equal(x.network, 'nat');
  assert.equal(y.network, 'isolated');
  // Wait for the namespace listener before any test relies on it.
  await until(async () => run('ip', ['netns', 'exec', NS, 'curl', '-s', '-m', '2',
    `http://${NS_PEER}:${NS_PORT}/`]).then((r) => r.stdout === 'internet-ok', () => false), 20000);
});

after(async () => {
  await a?.close();
  await b?.close();
  await aasd?.stop();
  nsServer?.kill();
  hostListener?.close();
  net4?.remove();
});

test('the isolation rule is installed and matches the QEMU users', async () => {
  const { stdout } = await run('nft', ['list', 'table', 'inet', 'aas_guard']);
  const uid = Number((await run('id', ['-u', 'aas-qemu'])).stdout.trim());
  // The probes' user and every per-VM user (AAS_QEMU_UIDS, default 3000000-3001023).
  assert.match(stdout, new RegExp(`meta skuid \\{ ${uid}, 3000000-3001023 \\} fib daddr type \\{ local,`));
  assert.match(stdout, /reject with tcp reset/);
});

test('a guest web server is reachable through its preview URL, bytes intact', async () => {
  await sh(sbx, 'mkdir -p ~/www && head -c 1048576 /dev/urandom > ~/www/blob.bin && sha256sum ~/www/blob.bin');
  const want = (await sh(sbx, 'sha256sum ~/www/blob.bin | cut -d" " -f1')).stdout.trim();
  await sh(sbx, 'cd ~/www && exec python3 -m http.server 8000', { background: true });
  const ex = await ok(a, 'expose_port', { sandbox_id: sbx, port: 8000 });
  assert.equal(ex.url, `http://8000-${sbx}.localhost:${aasd.port}/`);
  assert.equal(ex.public, true);
  assert.equal(ex.token, undefined);
  const r = await until(async () => { const x = await curl(sbx, 8000, '/blob.bin'); return x.status === 200 && x; });
  assert.equal(createHash('sha256').update(r.body).digest('hex'), want);
  // get_sandbox lists the exposed port.
  const g = await ok(a, 'get_sandbox', { sandbox_id: sbx });
  assert.deepEqual(g.ports.map((p) => [p.port, p.public, p.url]), [[8000, true, ex.url]]);
});

test('a 50 MiB download streams through without aasd holding it', async () => {
  await sh(sbx, 'head -c 52428800 /dev/urandom > ~/www/big.bin');
  const want = (await sh(sbx, 'sha256sum ~/www/big.bin | cut -d" " -f1')).stdout.trim();
  const status = () => readFileSync(`/proc/${aasd.proc.pid}/status`, 'utf8');
  const rss = () => Number(/VmRSS:\s+(\d+)/.exec(status())[1]);
  const out = path.join(STATE, 'big.download');
  const before = rss();
  let peak = before;
  const timer = setInterval(() => { peak = Math.max(peak, rss()); }, 50);
  try {
    const { stdout } = await run('curl', ['-sS', '-o', out, '-w', '%{http_code}', '--max-time', '300',
      '-H', `Host: ${previewHost(sbx, 8000)}`, `${aasd.url}/big.bin`]);
    assert.equal(stdout, '200');
  } finally {
    clearInterval(timer);
  }
  assert.equal(statSync(out).size, 52428800);
  assert.equal(createHash('sha256').update(readFileSync(out)).digest('hex'), want);
  rmSync(out);
  // Buffers are 256 KiB per direction: growth far below the body's size.
  assert.ok(peak - before < 16 * 1024, `aasd RSS grew by ${peak - before} KiB during the download`);
});

test('request bodies stream to the guest (upload, chunked and sized)', async () => {
  await ok(a, 'write_file', {
    sandbox_id: sbx,
    path: '/home/sandbox/upload.py',
    content: `import hashlib, http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        h = hashlib.sha256()
        if 'chunked' in self.headers.get('Transfer-Encoding', ''):
            while True:
                n = int(self.rfile.readline().strip(), 16)
                if n == 0:
                    self.rfile.readline(); break
                h.update(self.rfile.read(n)); self.rfile.readline()
        else:
            left = int(self.headers['Content-Length'])
            while left:
                d = self.rfile.read(min(left, 65536)); h.update(d); left -= len(d)
        body = h.hexdigest().encode()
        seen = 'te=%s cl=%s' % (self.headers.get('Transfer-Encoding', '-'), self.headers.get('Content-Length', '-'))
        self.send_response(200); self.send_header('X-Seen-Framing', seen)
        self.send_header('Content-Length', str(len(body))); self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(('0.0.0.0', 8100), H).serve_forever()
`,
  });
  await sh(sbx, 'exec python3 ~/upload.py', { background: true });
  await ok(a, 'expose_port', { sandbox_id: sbx, port: 8100 });
  const file = path.join(STATE, 'upload.bin');
  const data = Buffer.alloc(4 << 20, 7);
  for (let i = 0; i < data.length; i += 4096) data[i] = i & 0xff;
  (await import('node:fs')).writeFileSync(file, data);
  const want = createHash('sha256').update(data).digest('hex');
  const sized = await until(async () => {
    const x = await curl(sbx, 8100, '/', ['--max-time', '20', '--data-binary', `@${file}`]);
    if (x.status !== 200) throw new Error(`status ${x.status}: ${x.head}`);
    return x;
  });
  assert.equal(sized.body.toString(), want);
  const chunked = await curl(sbx, 8100, '/', ['-H', 'Transfer-Encoding: chunked', '--data-binary', `@${file}`]);
  assert.equal(chunked.status, 200);
  assert.equal(chunked.body.toString(), want);
  assert.match(chunked.head, /x-seen-framing: te=chunked cl=-\r?$/im);
  // Both framings from the client (RFC 9112 6.3: possible smuggling):
  // refused by the proxy, never passed on.
  const both = await curl(sbx, 8100, '/', ['-H', 'Transfer-Encoding: chunked',
    '-H', `Content-Length: ${data.length}`, '--data-binary', `@${file}`]);
  assert.equal(both.status, 400, both.head);
  assert.doesNotMatch(both.head, /x-seen-framing/i);
  assert.match(both.body.toString(), /both Transfer-Encoding and Content-Length/);
  assert.match(sized.head, new RegExp(`x-seen-framing: te=- cl=${data.length}\\r?$`, 'im'));
  rmSync(file);
});

test('a WebSocket echo server in the guest answers through the proxy', async () => {
  await ok(a, 'write_file', { sandbox_id: sbx, path: '/home/sandbox/ws.py', content: WS_ECHO_SERVER });
  await sh(sbx, 'exec python3 ~/ws.py', { background: true });
  await ok(a, 'expose_port', { sandbox_id: sbx, port: 9000 });
  const r = await until(async () => {
    const x = await wsEcho(aasd.port, previewHost(sbx, 9000), '/', 'hello through aas').catch(() => null);
    return x && x.status === 101 && x;
  });
  assert.equal(r.accept, r.want);
  assert.equal(r.echo, 'hello through aas');
});

test('nothing listening answers a friendly 502; unknown names 404; MCP is not behind previews', async () => {
  await ok(a, 'expose_port', { sandbox_id: sbx, port: 8999 });
  const r = await curl(sbx, 8999, '/');
  assert.equal(r.status, 502);
  assert.match(r.head, /content-type: text\/html/i);
  assert.match(r.body.toString(), /Nothing is listening on port 8999 inside the sandbox/);
  assert.equal((await curl(sbx, 8998, '/')).status, 404);
  // The MCP endpoint through a preview host reaches the proxy, never MCP.
  const m = await curl(sbx, 8998, '/v1/mcp', ['-X', 'POST', '-H', 'content-type: application/json',
    '--data', '{"jsonrpc":"2.0","id":1,"method":"ping"}']);
  assert.equal(m.status, 404);
  assert.doesNotMatch(m.body.toString(), /jsonrpc/);
  const h = await curl(sbx, 8000, '/healthz');
  assert.equal(h.status, 404);   // python's 404, not aasd's health
  assert.doesNotMatch(h.body.toString(), /"database"/);
  // And the API host never proxies.
  const api = await run('curl', ['-s', `${aasd.url}/blob.bin`]);
  assert.match(api.stdout, /not_found/);
});

test('private previews need the token or a valid signed URL', async () => {
  // A private forward to a second server on the same files.
  const ex = await ok(a, 'expose_port', { sandbox_id: sbx, port: 8001, public: false });
  await sh(sbx, 'cd ~/www && exec python3 -m http.server 8001', { background: true });
  assert.ok(ex.token && ex.signed_url && ex.signed_url_expires_at);
  assert.equal(ex.public, false);
  assert.equal((await curl(sbx, 8001, '/blob.bin')).status, 401);
  assert.equal((await curl(sbx, 8001, '/blob.bin', ['-H', 'x-aas-preview-token: aas_pt_wrong'])).status, 403);
  const good = await until(async () => {
    const x = await curl(sbx, 8001, '/blob.bin', ['-H', `x-aas-preview-token: ${ex.token}`]);
    return x.status === 200 && x;
  });
  assert.equal(good.body.length, 1048576);
  // The signed URL works and sets a cookie for the page's own requests.
  const u = new URL(ex.signed_url);
  const signed = await curl(sbx, 8001, `/${u.search}`);
  assert.equal(signed.status, 200);
  const cookie = /set-cookie: (aas_preview=[^;]+)/i.exec(signed.head)?.[1];
  assert.ok(cookie, signed.head);
  // Host-only (no Domain); plain-http previews use the unprefixed name, without Secure.
  const line = /^set-cookie: aas_preview=.*$/im.exec(signed.head)[0];
  assert.doesNotMatch(line, /domain=/i);
  assert.match(line, /; Path=\/;.*HttpOnly/);
  assert.equal((await curl(sbx, 8001, '/blob.bin', ['-H', `Cookie: ${cookie}`])).status, 200);
  // A cookie of the same name in front (set by another page) does not shadow it.
  assert.equal((await curl(sbx, 8001, '/blob.bin', ['-H', `Cookie: aas_preview=1.junk; ${cookie}`])).status, 200);
  assert.equal((await curl(sbx, 8001, '/blob.bin', ['-H', 'Cookie: aas_preview=1.junk'])).status, 403);
  // Tampered and expired signatures are refused.
  const tampered = u.search.replace(/aas_preview_sig=(.)/, (m, c) => `aas_preview_sig=${c === 'a' ? 'b' : 'a'}`);
  assert.equal((await curl(sbx, 8001, `/${tampered}`)).status, 403);
  const hash = createHash('sha256').update(ex.token).digest('hex');
  const exp = Math.floor(Date.now() / 1000) - 5;
  const sig = createHmac('sha256', hash).update(`${sbx}:8001:${exp}`).digest('hex');
  assert.equal((await curl(sbx, 8001, `/?aas_preview_exp=${exp}&aas_preview_sig=${sig}`)).status, 403);
  // A correctly made one that has not expired passes (the scheme is what the docs say).
  const exp2 = exp + 600;
  const sig2 = createHmac('sha256', hash).update(`${sbx}:8001:${exp2}`).digest('hex');
  assert.equal((await curl(sbx, 8001, `/?aas_preview_exp=${exp2}&aas_preview_sig=${sig2}`)).status, 200);
});

test('an upstream cookie never leaves its preview host (one for another domain is left out)', async () => {
  const own = previewHost(sbx, 8200).split(':')[0].toUpperCase();
  await ok(a, 'write_file', {
    sandbox_id: sbx,
    path: '/home/sandbox/cookie.py',
    content: `import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header('Set-Cookie', 'x=1; Domain=localhost; Path=/')
        self.send_header('Set-Cookie', 'aas_preview=1.junk; Path=/;domain=.localhost ;HttpOnly')
        self.send_header('Set-Cookie', 'own=1; Domain=.${own}; Path=/')
        self.send_header('Set-Cookie', 'plain=2; HttpOnly')
        self.send_header('Content-Length', '2'); self.end_headers(); self.wfile.write(b'ok')
http.server.HTTPServer(('0.0.0.0', 8200), H).serve_forever()
`,
  });
  await sh(sbx, 'exec python3 ~/cookie.py', { background: true });
  await ok(a, 'expose_port', { sandbox_id: sbx, port: 8200 });
  const r = await until(async () => { const x = await curl(sbx, 8200, '/'); return x.status === 200 && x; });
  const cookies = r.head.split(/\r?\n/).filter((l) => /^set-cookie:/i.test(l));
  assert.deepEqual(cookies.map((l) => l.replace(/^set-cookie: /i, '')),
    ['own=1; Path=/', 'plain=2; HttpOnly'], r.head);
  assert.equal(r.body.toString(), 'ok');
});

test('a preview path or query over the limit is refused with 414, never cut short', async () => {
  const long = await curl(sbx, 8000, `/${'a'.repeat(2000)}`);
  assert.equal(long.status, 414, long.head);
  assert.match(long.body.toString(), /too long/);
  const longQuery = await curl(sbx, 8000, `/blob.bin?q=${'b'.repeat(20000)}`);
  assert.equal(longQuery.status, 414, longQuery.head);
  // Just under the limit still reaches the guest (python's own 404).
  const under = await curl(sbx, 8000, `/${'a'.repeat(1000)}`);
  assert.equal(under.status, 404);
  assert.doesNotMatch(under.body.toString(), /aas sandbox preview/);
});

test('guests cannot reach host services or other sandboxes', async () => {
  const hostPort = hostListener.address().port;
  const { stdout: fwd } = await run('psql', [DB_URL, '-qtAX', '-c',
  `SELECT host_port FROM sandbox_ports WHERE sandbox_id = '${sbx}' AND port = 8000`]);
  const otherForward = Number(fwd.trim());
  assert.ok(otherForward > 0);
  const probe = (host, port) => `curl -sS -m 5 -o /dev/null -w '%{http_code}' http://${host}:${port}/ 2>&1; echo " rc=$?"`;
  for (const [host, port, what] of [
    ['10.0.2.2', hostPort, 'a listener on the host loopback'],
    ['10.0.2.2', aasd.port, 'aasd'],
    ['10.0.2.2', 5432, 'PostgreSQL port'],
    ['10.0.2.2', otherForward, "another sandbox's forwarded port"],
    [net4.host, aasd.port, 'aasd through a host address'],
  ]) {
    for (const id of [closed, sbx]) {
      const r = await sh(id, probe(host, port));
      assert.doesNotMatch(r.stdout, / rc=0$/m, `${what} (${host}:${port}) reachable from ${id}: ${r.stdout}`);
    }
  }
  // The host's own listener really is there (the probe is not vacuous).
  const direct = await run('curl', ['-s', '--http0.9', '-m', '5', `http://127.0.0.1:${hostPort}/`]).catch((e) => e);
  assert.match(String(direct.stdout), /host-secret/);
});

test('internet: false has no route out; internet: true reaches the stand-in internet', async () => {
  const url = `http://${NS_PEER}:${NS_PORT}/`;
  const on = await sh(sbx, `curl -sS -m 10 ${url}`);
  assert.equal(on.stdout, 'internet-ok');
  const off = await sh(closed, `curl -sS -m 5 ${url}; echo " rc=$?"; ip route`);
  assert.doesNotMatch(off.stdout, /internet-ok/);
  assert.doesNotMatch(off.stdout, /default/);
  // The closed sandbox still serves exposed ports.
  await sh(closed, 'mkdir -p ~/w && echo closed-ok > ~/w/i.txt && cd ~/w && exec python3 -m http.server 8000', { background: true });
  await ok(a, 'expose_port', { sandbox_id: closed, port: 8000 });
  const r = await until(async () => { const x = await curl(closed, 8000, '/i.txt'); return x.status === 200 && x; });
  assert.equal(r.body.toString(), 'closed-ok\n');
});

// A preview request held open by the guest (headers and a first byte of a
// long body, then nothing): resolves with { status, headers, body, ended }
// once the head is in; `ended` resolves when the connection ends.
function holdPreview(id, port) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: aasd.port, path: '/hold', agent: false,
      headers: { Host: previewHost(id, port) } }, (res) => {
      const ended = new Promise((r) => res.socket.once('close', () => r(Date.now())));
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('error', () => {});
      const done = () => resolve({ status: res.statusCode, headers: res.headers, body, ended,
        end: () => req.destroy() });
      if (res.statusCode === 200) done();
      else res.on('end', done);
    });
    req.on('error', reject);
    req.end();
  });
}

const HOLD_SERVER = `import http.server, time
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header('Content-Length', '1000000'); self.end_headers()
        self.wfile.write(b'x'); self.wfile.flush()
        time.sleep(300)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(('0.0.0.0', 8300), H).serve_forever()
`;

test('preview requests are capped per sandbox and per account; a:<account> closes them', async () => {
  for (const id of [sbx, closed]) {
    await ok(a, 'write_file', { sandbox_id: id, path: '/home/sandbox/hold.py', content: HOLD_SERVER });
    await sh(id, 'exec python3 ~/hold.py', { background: true });
    await ok(a, 'expose_port', { sandbox_id: id, port: 8300 });
  }
  const held = [];
  try {
    for (const id of [sbx, closed]) {
      held.push(await until(async () => { const h = await holdPreview(id, 8300); if (h.status !== 200) h.end(); return h.status === 200 && h; }));
    }
    held.push(await holdPreview(sbx, 8300), await holdPreview(sbx, 8300));
    assert.deepEqual(held.map((h) => h.status), [200, 200, 200, 200]);
    // The sandbox has 3 (AAS_MAX_PREVIEW_CONNS_PER_SANDBOX), the account 4.
    const overSandbox = await holdPreview(sbx, 8300);
    assert.equal(overSandbox.status, 429);
    assert.equal(overSandbox.headers['retry-after'], '2');
    assert.match(overSandbox.headers['content-type'], /^text\/plain/);
    assert.match(overSandbox.body, /AAS_MAX_PREVIEW_CONNS_PER_SANDBOX/);
    const overAccount = await holdPreview(closed, 8300);
    assert.equal(overAccount.status, 429);
    assert.match(overAccount.body, /AAS_MAX_PREVIEW_CONNS_PER_ACCOUNT/);
    overSandbox.end();
    overAccount.end();
    // A client that goes away gives its place back.
    held.shift().end();
    const again = await until(async () => { const h = await holdPreview(sbx, 8300); if (h.status !== 200) h.end(); return h.status === 200 && h; }, 10000);
    held.push(again);
    // The account-disable notice ends every open preview of the account, promptly.
    const t0 = Date.now();
    await run('psql', [DB_URL, '-qtAX', '-c', `SELECT pg_notify('aas_invalidate', 'a:${alice.account_id}')`]);
    const ends = await Promise.race([Promise.all(held.map((h) => h.ended)), sleep(10000).then(() => null)]);
    assert.ok(ends, 'held previews still open 10 s after a:<account>');
    const slowest = Math.max(...ends) - t0;
    assert.ok(slowest < 3000, `closing took ${slowest} ms`);
    // The counts were given back: a full sandbox's worth is admitted again
    // (each request's thread gives its count back within a fraction of a second).
    held.length = 0;
    await sleep(1000);
    for (let i = 0; i < 3; i++) held.push(await holdPreview(sbx, 8300));
    assert.deepEqual(held.map((h) => h.status), [200, 200, 200]);
  } finally {
    for (const h of held) h.end();
    // Their places come back once the proxy sees the clients gone (within
    // a fraction of a second); the tests after this one need them.
    await sleep(1500);
  }
});

test('expose_port refuses bad input and changes nothing', async () => {
  const before = (await ok(a, 'get_sandbox', { sandbox_id: sbx })).ports;
  for (const port of [0, 70000, -1]) {
    const r = await call(a, 'expose_port', { sandbox_id: sbx, port });
    assert.ok(r.isError, `port ${port} accepted`);
  }
  const dup = await call(a, 'expose_port', { sandbox_id: sbx, port: 8000 });
  assert.ok(dup.isError);
  assert.match(dup.content[0].text, /already exposed/);
  const other = await call(b, 'expose_port', { sandbox_id: sbx, port: 8500 });
  assert.ok(other.isError);
  assert.match(other.content[0].text, /not_found|no sandbox/);
  const after_ = (await ok(a, 'get_sandbox', { sandbox_id: sbx })).ports;
  assert.deepEqual(after_, before);
});

test('after destroy the preview answers 404 and the ports are gone', async () => {
  assert.equal((await curl(sbx, 8000, '/blob.bin')).status, 200);
  await ok(a, 'destroy_sandbox', { sandbox_id: sbx });
  assert.equal((await curl(sbx, 8000, '/blob.bin')).status, 404);
  const gone = await call(a, 'expose_port', { sandbox_id: sbx, port: 8000 });
  assert.ok(gone.isError);
  const g = await ok(a, 'get_sandbox', { sandbox_id: sbx });
  assert.deepEqual(g.ports, []);
  await ok(a, 'destroy_sandbox', { sandbox_id: closed });
  assert.equal((await curl(closed, 8000, '/i.txt')).status, 404);
});
