// aas-mcp, the stdio bridge, driven by the official SDK's stdio client
// against a real aasd with VMs (one sandbox): the forwarded tools, the sync
// tools (incremental, excludes, delete_extras, links), and its failures.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  mkdtempSync, mkdirSync, writeFileSync, readFileSync, rmSync, statSync, utimesSync,
  symlinkSync, existsSync, chmodSync, unlinkSync, readdirSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { startAasd, newAccount, vmEnv, freePort, BUILD } from './lib/harness.mjs';

const BRIDGE = path.join(BUILD, 'aas-mcp');
const FORWARDED = ['create_sandbox', 'run_command', 'write_file', 'read_file', 'list_files',
  'expose_port', 'get_sandbox', 'list_sandboxes', 'extend_sandbox', 'destroy_sandbox',
  'pause_sandbox', 'resume_sandbox', 'snapshot_sandbox', 'list_snapshots', 'delete_snapshot',
  'get_usage', 'get_service_info', 'get_command', 'kill_command'];
const LONG = { timeout: 300000 };

let aasd;
let account;
let tmp;
let bridge;       // { client, stderr() }
let sbx;

// Starts aas-mcp through the SDK's StdioClientTransport; stderr is kept.
async function connect(env) {
  const transport = new StdioClientTransport({ command: BRIDGE, args: [], env, stderr: 'pipe' });
  let log = '';
  transport.stderr.on('data', (d) => { log += d; });
  const client = new Client({ name: 'aas-bridge-e2e', version: '1.0.0' });
  await client.connect(transport);
  return { client, stderr: () => log };
}

async function call(name, args, c = bridge.client) {
  return c.callTool({ name, arguments: args }, undefined, LONG);
}

async function ok(name, args) {
  const r = await call(name, args);
  assert.ok(!r.isError, `${name}: ${r.content?.[0]?.text}`);
  return r.structuredContent;
}

async function failText(name, args, c) {
  const r = await call(name, args, c);
  assert.equal(r.isError, true, `${name} should fail: ${JSON.stringify(r.structuredContent)}`);
  return r.content[0].text;
}

async function sh(command) {
  const r = await ok('run_command', { sandbox_id: sbx, command });
  assert.equal(r.exit_code, 0, `${command}: ${r.stderr}`);
  return r.stdout;
}

// Runs aas-mcp directly (no SDK) and collects its exit code and output.
function runRaw(env, input = '') {
  return new Promise((resolve) => {
    const p = spawn(BRIDGE, [], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { err += d; });
    p.on('close', (code) => resolve({ code, out, err }));
    // aas-mcp refuses a bad configuration before it reads stdin and exits;
    // writing to its closed stdin then fails with EPIPE, which is expected
    // and must not end the test process.
    p.stdin.on('error', () => {});
    p.stdin.end(input);
  });
}

function local(...parts) { return path.join(tmp, ...parts); }

function writeAt(file, content, mtimeS) {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, content);
  if (mtimeS) utimesSync(file, mtimeS, mtimeS);
}

const mtimeOf = (file) => Math.floor(statSync(file).mtimeMs / 1000);

before(async () => {
  tmp = mkdtempSync(path.join(tmpdir(), 'aas-bridge-'));
  aasd = await startAasd(vmEnv('bridge'));
  account = await newAccount();
  bridge = await connect({ PATH: process.env.PATH, AAS_API_KEY: account.api_key,
    AAS_BASE_URL: aasd.url });
});

const SANITIZER = /ERROR: (Address|Leak)Sanitizer|runtime error:/;

after(async () => {
  if (sbx) await call('destroy_sandbox', { sandbox_id: sbx }).catch(() => {});
  await bridge?.client.close();
  await aasd?.stop();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
  if (bridge && SANITIZER.test(bridge.stderr())) {
    throw new Error(`sanitizer report from aas-mcp:\n${bridge.stderr().slice(-4000)}`);
  }
});

test('lists the forwarded tools with the server schemas, and the two sync tools', async () => {
  const { tools } = await bridge.client.listTools();
  const names = tools.map((t) => t.name);
  assert.deepEqual(names, [...FORWARDED, 'sync_to_sandbox', 'sync_from_sandbox']);
  const run = tools.find((t) => t.name === 'run_command');
  assert.equal(run.inputSchema.properties.sandbox_id.pattern, '^sbx-[a-z0-9]{16}$');
  assert.ok(run.outputSchema);
  const sync = tools.find((t) => t.name === 'sync_to_sandbox');
  assert.deepEqual(sync.inputSchema.required, ['sandbox_id', 'local_path', 'sandbox_path']);
  assert.equal(sync.inputSchema.properties.sandbox_id.pattern, '^sbx-[a-z0-9]{16}$');
  assert.equal(sync.inputSchema.properties.delete_extras.type, 'boolean');
  assert.ok(bridge.client.getServerVersion().name === 'aas-mcp');
  await bridge.client.ping();
});

test('create -> run_command -> write_file / read_file through the REST API', async () => {
  const s = await ok('create_sandbox', { size: 'small', timeout_minutes: 15, name: 'bridge' });
  sbx = s.sandbox_id;
  assert.match(sbx, /^sbx-[a-z0-9]{16}$/);
  assert.equal(s.state, 'running');
  const r = await ok('run_command', { sandbox_id: sbx, command: 'echo out; echo err >&2; exit 3' });
  assert.equal(r.stdout, 'out\n');
  assert.equal(r.stderr, 'err\n');
  assert.equal(r.exit_code, 3);
  const w = await ok('write_file', { sandbox_id: sbx, path: 'notes/hello.txt',
    content: 'héllo\n"quoted" $HOME\n' });
  assert.equal(w.path, '/home/sandbox/notes/hello.txt');
  const t = await ok('read_file', { sandbox_id: sbx, path: 'notes/hello.txt' });
  assert.equal(t.content, 'héllo\n"quoted" $HOME\n');
  assert.equal(t.eof, true);
  assert.equal(t.total_size, Buffer.byteLength(t.content));
  const bytes = randomBytes(3000);
  await ok('write_file', { sandbox_id: sbx, path: '/tmp/bin', content_base64: bytes.toString('base64'),
    mode: '0600' });
  const b = await ok('read_file', { sandbox_id: sbx, path: '/tmp/bin', encoding: 'base64',
    offset: 1000, length: 1000 });
  assert.equal(b.content, bytes.subarray(1000, 2000).toString('base64'));
  assert.equal(b.total_size, 3000);
  assert.equal(b.eof, false);
  const g = await ok('get_sandbox', { sandbox_id: sbx });
  assert.equal(g.sandbox_id, sbx);
  const l = await ok('list_sandboxes', { state: 'live' });
  assert.ok(l.sandboxes.some((x) => x.sandbox_id === sbx));
  const u = await ok('get_usage', { limit: 5 });
  assert.ok(Number.isInteger(u.balance));
  // A REST error becomes an isError result with the API's message.
  const nf = await failText('get_sandbox', { sandbox_id: 'sbx-0000000000000000' });
  assert.match(nf, /^Error \(not_found\)/);
  const bad = await failText('run_command', { sandbox_id: sbx });
  assert.match(bad, /command/);
  // expose_port goes through the REST ports route.
  const ex = await ok('expose_port', { sandbox_id: sbx, port: 8000 });
  assert.match(ex.url, new RegExp(`^http://8000-${sbx}\\.localhost:\\d+/$`));
  assert.match(await failText('expose_port', { sandbox_id: sbx, port: 8000 }), /already exposed/);
});

test('a cancelled call gets no answer and the bridge keeps serving', async () => {
  const ac = new AbortController();
  const t0 = Date.now();
  const p = bridge.client.callTool({ name: 'run_command',
    arguments: { sandbox_id: sbx, command: 'sleep 20' } }, undefined,
  { signal: ac.signal, timeout: 60000 });
  setTimeout(() => ac.abort('changed my mind'), 1000);
  await assert.rejects(p);
  await bridge.client.ping();
  assert.ok(Date.now() - t0 < 10000);
});

test('sync_to_sandbox sends everything once, then nothing, then only what changed', async () => {
  const src = local('proj');
  const base = 1700000000;
  writeAt(path.join(src, 'a.txt'), 'alpha\n', base);
  writeAt(path.join(src, 'sub', 'b.txt'), 'bravo\n', base + 1);
  writeAt(path.join(src, 'sub', 'deep', 'c.bin'), randomBytes(70000), base + 2);
  writeAt(path.join(src, 'run.sh'), '#!/bin/sh\necho ran\n', base + 3);
  chmodSync(path.join(src, 'run.sh'), 0o755);
  writeAt(path.join(src, "it's here.txt"), 'quote\n', base + 4);
  writeAt(path.join(src, '.git', 'HEAD'), 'ref: refs/heads/main\n', base);
  writeAt(path.join(src, 'node_modules', 'x', 'index.js'), 'x\n', base);
  mkdirSync(path.join(src, 'empty'));

  const first = await ok('sync_to_sandbox', { sandbox_id: sbx, local_path: src,
    sandbox_path: 'proj' });
  assert.equal(first.direction, 'to_sandbox');
  assert.equal(first.sandbox_path, '/home/sandbox/proj');
  assert.equal(first.files_sent, 5);
  assert.equal(first.files_skipped, 0);
  assert.equal(first.bytes_sent, ['a.txt', 'sub/b.txt', 'sub/deep/c.bin', 'run.sh', "it's here.txt"]
    .reduce((n, f) => n + statSync(path.join(src, f)).size, 0));
  assert.deepEqual([...first.sent].sort(),
    ["a.txt", "it's here.txt", 'run.sh', 'sub/b.txt', 'sub/deep/c.bin']);
  const remote = await sh('cd proj && find . | sort && stat -c "%n %Y %a" a.txt sub/deep/c.bin run.sh'
    + ' && ./run.sh && sha256sum sub/deep/c.bin');
  assert.ok(!remote.includes('.git') && !remote.includes('node_modules'), remote);
  assert.ok(remote.includes('./empty\n'), remote);
  assert.ok(remote.includes(`a.txt ${base} 644`), remote);
  assert.ok(remote.includes(`sub/deep/c.bin ${base + 2} `), remote);
  assert.ok(remote.includes(`run.sh ${base + 3} 755`), remote);
  assert.ok(remote.includes('ran\n'), remote);

  const second = await ok('sync_to_sandbox', { sandbox_id: sbx, local_path: src,
    sandbox_path: 'proj' });
  assert.equal(second.files_sent, 0);
  assert.equal(second.files_skipped, 5);
  assert.equal(second.bytes_sent, 0);

  writeAt(path.join(src, 'sub', 'b.txt'), 'bravo, changed\n', base + 100);
  const third = await ok('sync_to_sandbox', { sandbox_id: sbx, local_path: src,
    sandbox_path: 'proj' });
  assert.equal(third.files_sent, 1);
  assert.deepEqual(third.sent, ['sub/b.txt']);
  assert.equal(third.files_skipped, 4);
  assert.equal(await sh('cat proj/sub/b.txt'), 'bravo, changed\n');
});

test('sync_from_sandbox copies back with the remote times, then only what changed', async () => {
  const dst = local('back', 'here');   // made when missing
  const first = await ok('sync_from_sandbox', { sandbox_id: sbx, local_path: dst,
    sandbox_path: '/home/sandbox/proj' });
  assert.equal(first.direction, 'from_sandbox');
  assert.equal(first.files_sent, 5);
  assert.equal(readFileSync(path.join(dst, 'sub', 'b.txt'), 'utf8'), 'bravo, changed\n');
  assert.deepEqual(readFileSync(path.join(dst, 'sub', 'deep', 'c.bin')),
    readFileSync(local('proj', 'sub', 'deep', 'c.bin')));
  assert.equal(mtimeOf(path.join(dst, 'a.txt')), 1700000000);
  assert.equal(statSync(path.join(dst, 'run.sh')).mode & 0o777, 0o755);
  assert.ok(statSync(path.join(dst, 'empty')).isDirectory());
  assert.ok(!existsSync(path.join(dst, '.git')));

  const again = await ok('sync_from_sandbox', { sandbox_id: sbx, local_path: dst,
    sandbox_path: 'proj' });
  assert.equal(again.files_sent, 0);
  assert.equal(again.files_skipped, 5);

  await sh('echo made remotely > proj/sub/new.txt && ln -s /etc/passwd proj/link');
  const third = await ok('sync_from_sandbox', { sandbox_id: sbx, local_path: dst,
    sandbox_path: 'proj' });
  assert.deepEqual(third.sent, ['sub/new.txt']);
  assert.equal(readFileSync(path.join(dst, 'sub', 'new.txt'), 'utf8'), 'made remotely\n');
  assert.ok(!existsSync(path.join(dst, 'link')));
  assert.ok(third.warnings.some((w) => w.startsWith('link:')), JSON.stringify(third.warnings));
  // No temporary files are left behind.
  assert.ok(!readdirSync(dst, { recursive: true }).some((f) => f.includes('.aas-sync-')));
});

test('delete_extras removes what the source lacks, never excluded names', async () => {
  const src = local('proj');
  await sh('cd proj && echo x > extra.txt && mkdir -p olddir/inner && echo y > olddir/inner/f'
    + ' && mkdir -p .git && echo keep > .git/config');
  unlinkSync(path.join(src, 'a.txt'));

  const keep = await ok('sync_to_sandbox', { sandbox_id: sbx, local_path: src,
    sandbox_path: 'proj' });
  assert.equal(keep.files_deleted, 0);
  assert.equal(await sh('test -e proj/extra.txt && test -e proj/a.txt && echo both'), 'both\n');

  const del = await ok('sync_to_sandbox', { sandbox_id: sbx, local_path: src,
    sandbox_path: 'proj', delete_extras: true });
  assert.deepEqual([...del.deleted].sort(),
    ['a.txt', 'extra.txt', 'link', 'olddir', 'olddir/inner', 'olddir/inner/f', 'sub/new.txt']);
  assert.equal(del.files_deleted, 5);
  assert.equal(del.dirs_deleted, 2);
  assert.equal(await sh('cd proj && ls -A | LC_ALL=C sort | tr "\\n" " "'),
    ".git empty it's here.txt run.sh sub ");

  // And back: the local copy loses what the sandbox no longer has.
  const dst = local('back', 'here');
  writeAt(path.join(dst, 'local-only.txt'), 'mine\n');
  writeAt(path.join(dst, '.git', 'HEAD'), 'kept\n');
  const pulled = await ok('sync_from_sandbox', { sandbox_id: sbx, local_path: dst,
    sandbox_path: 'proj', delete_extras: true });
  assert.ok(pulled.deleted.includes('local-only.txt'));
  assert.ok(pulled.deleted.includes('a.txt'));
  assert.ok(!existsSync(path.join(dst, 'local-only.txt')));
  assert.ok(!existsSync(path.join(dst, 'a.txt')));
  assert.equal(readFileSync(path.join(dst, '.git', 'HEAD'), 'utf8'), 'kept\n');
});

// GET requests per route, from aasd's own counters.
async function routeCount(route) {
  const text = await (await fetch(`${aasd.url}/metrics`)).text();
  let n = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith(`aas_http_requests_total{route="${route}",`)) n += Number(line.split(' ').pop());
  }
  return n;
}

test('sync_from_sandbox brings many files in one tree download; hard links and excluded names too', LONG, async () => {
  await sh('mkdir -p many/src many/node_modules/dep && cd many && for i in $(seq 40); do echo "file $i" > src/f$i.txt; done'
    + ' && head -c 3000000 /dev/urandom > blob.bin && echo shared > one && ln one two'
    + ' && echo secret > private && chmod 600 private && touch -d @1700000123 src/f7.txt'
    + ' && cd node_modules/dep && seq 300 | xargs touch');
  const tree0 = await routeCount('/v1/sandboxes/{sandbox_id}/tree');
  const files0 = await routeCount('/v1/sandboxes/{sandbox_id}/files/content');
  const dst = local('many');
  const r = await ok('sync_from_sandbox', { sandbox_id: sbx, local_path: dst, sandbox_path: 'many' });
  assert.equal(r.files_sent, 44);
  // One tree download; the hard link's second name comes on its own.
  assert.equal(await routeCount('/v1/sandboxes/{sandbox_id}/tree') - tree0, 1);
  assert.ok(await routeCount('/v1/sandboxes/{sandbox_id}/files/content') - files0 <= 1);
  assert.equal(readFileSync(path.join(dst, 'src', 'f40.txt'), 'utf8'), 'file 40\n');
  assert.equal(readFileSync(path.join(dst, 'one'), 'utf8'), 'shared\n');
  assert.equal(readFileSync(path.join(dst, 'two'), 'utf8'), 'shared\n');
  const sum = (await sh('sha256sum many/blob.bin')).split(' ')[0];
  const { createHash } = await import('node:crypto');
  assert.equal(createHash('sha256').update(readFileSync(path.join(dst, 'blob.bin'))).digest('hex'), sum);
  assert.equal(statSync(path.join(dst, 'private')).mode & 0o777, 0o600);
  assert.equal(mtimeOf(path.join(dst, 'src', 'f7.txt')), 1700000123);
  assert.ok(!existsSync(path.join(dst, 'node_modules')));
  assert.ok(!readdirSync(dst, { recursive: true }).some((f) => f.includes('.aas-sync-')));
  // Nothing changed: nothing moves.
  const again = await ok('sync_from_sandbox', { sandbox_id: sbx, local_path: dst, sandbox_path: 'many' });
  assert.equal(again.files_sent, 0);
  assert.equal(await routeCount('/v1/sandboxes/{sandbox_id}/tree') - tree0, 1);
});

test('a sandbox tree larger than one listing is walked level by level', async () => {
  // 6000 names in an excluded node_modules exceed list_files' 5000.
  await sh('mkdir -p big/node_modules/pkg big/src && cd big/node_modules/pkg'
    + ' && seq 6000 | xargs touch && echo code > ../../src/main.js');
  const r = await ok('sync_from_sandbox', { sandbox_id: sbx, local_path: local('big'),
    sandbox_path: 'big' });
  assert.deepEqual(r.sent, ['src/main.js']);
  assert.ok(!existsSync(local('big', 'node_modules')));
  const all = await call('sync_from_sandbox', { sandbox_id: sbx, local_path: local('big2'),
    sandbox_path: 'big', excludes: [] });
  assert.equal(all.isError, true);
  assert.match(all.content[0].text, /pkg holds more than 5000 entries/);
});

test('a link leading outside the named directory is refused before anything moves', async () => {
  const src = local('leaky');
  writeAt(path.join(src, 'fine.txt'), 'fine\n');
  writeAt(local('secret.txt'), 'do not send\n');
  mkdirSync(path.join(src, 'sub'));
  symlinkSync(local('secret.txt'), path.join(src, 'sub', 'escape'));
  const text = await failText('sync_to_sandbox', { sandbox_id: sbx, local_path: src,
    sandbox_path: 'leaky' });
  assert.match(text, /sub\/escape is a symbolic link to .*outside/);
  assert.equal(await sh('test -e leaky && echo yes || echo no'), 'no\n');
  // A link that stays inside is sent as the file it names.
  unlinkSync(path.join(src, 'sub', 'escape'));
  symlinkSync('../fine.txt', path.join(src, 'sub', 'alias'));
  const r = await ok('sync_to_sandbox', { sandbox_id: sbx, local_path: src, sandbox_path: 'leaky' });
  assert.equal(r.files_sent, 2);
  assert.equal(await sh('cat leaky/sub/alias'), 'fine\n');
  // A local directory reached through a link is not written through either.
  const dst = local('pull');
  mkdirSync(dst);
  mkdirSync(local('elsewhere'));
  symlinkSync(local('elsewhere'), path.join(dst, 'sub'));
  const t2 = await failText('sync_from_sandbox', { sandbox_id: sbx, local_path: dst,
    sandbox_path: 'leaky' });
  assert.match(t2, /refusing to write through it/);
  assert.ok(!existsSync(local('elsewhere', 'alias')));
});

test('bad sync arguments get clear tool errors', async () => {
  assert.match(await failText('sync_to_sandbox', { sandbox_id: sbx, local_path: 'relative/dir',
    sandbox_path: 'x' }), /local_path: must be an absolute path/);
  assert.match(await failText('sync_to_sandbox', { sandbox_id: sbx, local_path: local('nope'),
    sandbox_path: 'x' }), /local_path: .*No such file/);
  assert.match(await failText('sync_to_sandbox', { sandbox_id: sbx, local_path: local('proj'),
    sandbox_path: '../etc' }), /sandbox_path: '\.\.' is not allowed/);
  assert.match(await failText('sync_from_sandbox', { sandbox_id: sbx, local_path: local('x'),
    sandbox_path: '/no/such/dir' }), /^Error \(not_found\)/);
  assert.match(await failText('sync_to_sandbox', { sandbox_id: sbx, local_path: local('proj') }),
    /sandbox_path/);
});

test('a missing AAS_API_KEY stops aas-mcp with exit code 2 and says why', async () => {
  const r = await runRaw({ PATH: process.env.PATH, AAS_BASE_URL: aasd.url });
  assert.equal(r.code, 2);
  assert.match(r.err, /AAS_API_KEY is not set/);
  assert.equal(r.out, '');
  const bad = await runRaw({ PATH: process.env.PATH, AAS_API_KEY: 'k', AAS_BASE_URL: 'ftp://x' });
  assert.equal(bad.code, 2);
  assert.match(bad.err, /AAS_BASE_URL/);
});

test('an unreachable AAS_BASE_URL gives a clear tool error within seconds', async () => {
  const port = await freePort();   // nothing listens there now
  const b = await connect({ PATH: process.env.PATH, AAS_API_KEY: account.api_key,
    AAS_BASE_URL: `http://127.0.0.1:${port}`, AAS_CONNECT_TIMEOUT_S: '3' });
  try {
    const t0 = Date.now();
    const text = await failText('get_usage', {}, b.client);
    assert.ok(Date.now() - t0 < 5000);
    assert.match(text, /cannot reach the aas API at http:\/\/127\.0\.0\.1:\d+\/v1/);
    assert.match(text, /AAS_BASE_URL/);
    assert.ok(!b.stderr().includes(account.api_key));
  } finally {
    await b.client.close();
    assert.doesNotMatch(b.stderr(), SANITIZER);
  }
});

test('a base URL ending in /v1 works, with a warning', async () => {
  const b = await connect({ PATH: process.env.PATH, AAS_API_KEY: account.api_key,
    AAS_BASE_URL: `${aasd.url}/v1/` });
  try {
    const u = await call('get_sandbox', { sandbox_id: sbx }, b.client);
    assert.ok(!u.isError, u.content[0].text);
    assert.match(b.stderr(), /warn AAS_BASE_URL should be the origin only/);
    assert.ok(!b.stderr().includes(account.api_key));
    assert.ok(!aasd.log().includes(account.api_key));
  } finally {
    await b.client.close();
    assert.doesNotMatch(b.stderr(), SANITIZER);
  }
});

test('aas-mcp answers line by line and exits 0 when its input ends', async () => {
  const lines = [
    { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-03-26',
      capabilities: {}, clientInfo: { name: 'raw', version: '1' } } },
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    { jsonrpc: '2.0', id: 2, method: 'ping' },
    { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'get_sandbox',
      arguments: { sandbox_id: sbx } } },
    { jsonrpc: '2.0', id: 4, method: 'no/such' },
  ].map((m) => JSON.stringify(m)).join('\n') + '\nnot json\n';
  const r = await runRaw({ PATH: process.env.PATH, AAS_API_KEY: account.api_key,
    AAS_BASE_URL: aasd.url }, lines);
  assert.equal(r.code, 0, r.err);
  assert.doesNotMatch(r.err, SANITIZER);
  const out = r.out.trim().split('\n').map((l) => JSON.parse(l));
  const byId = Object.fromEntries(out.map((m) => [m.id, m]));
  assert.equal(byId[1].result.protocolVersion, '2025-03-26');
  assert.deepEqual(byId[2].result, {});
  assert.equal(byId[3].result.structuredContent.sandbox_id, sbx);   // finished after EOF
  assert.equal(byId[4].error.code, -32601);
  assert.equal(byId[null].error.code, -32700);
  const unknown = await runRaw({ PATH: process.env.PATH, AAS_API_KEY: 'k' },
    `${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {
      protocolVersion: '1999-01-01', capabilities: {}, clientInfo: { name: 'x', version: '1' } } })}\n`);
  assert.equal(JSON.parse(unknown.out).result.protocolVersion, '2025-11-25');
});

test('get_command and kill_command through the bridge', async () => {
  const bg = await ok('run_command', { sandbox_id: sbx, command: 'echo started; sleep 1; echo done',
    background: true });
  // Each wait returns with news: follow it to the end from the offsets.
  let out = '';
  let at = 0;
  let got;
  for (let i = 0; i < 10; i++) {
    got = await ok('get_command', { sandbox_id: sbx, command_id: bg.command_id, stdout_offset: at,
      wait_seconds: 20 });
    out += got.stdout;
    at = got.next_stdout_offset;
    if (got.state !== 'running') break;
  }
  assert.equal(got.state, 'exited', JSON.stringify(got));
  assert.equal(out, 'started\ndone\n');
  const later = await ok('get_command', { sandbox_id: sbx, command_id: bg.command_id, stdout_offset: at });
  assert.equal(later.stdout, '');
  const long = await ok('run_command', { sandbox_id: sbx, command: 'sleep 300', background: true });
  const k = await ok('kill_command', { sandbox_id: sbx, command_id: long.command_id, signal: 'KILL' });
  assert.ok(['killed', 'running'].includes(k.state), JSON.stringify(k));
  let end;
  for (let i = 0; i < 5; i++) {
    end = await ok('get_command', { sandbox_id: sbx, command_id: long.command_id, wait_seconds: 10 });
    if (end.state !== 'running') break;
  }
  assert.equal(end.state, 'killed', JSON.stringify(end));
});

test('destroy_sandbox through the bridge', async () => {
  const d = await ok('destroy_sandbox', { sandbox_id: sbx });
  assert.equal(d.sandbox_id, sbx);
  sbx = null;
  assert.ok(!bridge.stderr().includes(account.api_key));
});
