// Trees over REST: PUT /v1/sandboxes/{id}/tree unpacks a tar stream in the
// guest as the sandbox user, GET returns a directory as one. Archives made
// by GNU tar (gnu and pax formats) go in and come back; set-id bits are
// cleared; a FIFO in the guest is left out of a download. Hand-made
// hostile archives (absolute and ".." names, a link out of the directory,
// a device, a truncated stream, too many members) are refused naming the
// member, and nothing in the directory changes: not even the good members
// before the bad one, and no stage directory is left behind.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync,
  chmodSync, statSync, readlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import net from 'node:net';
import path from 'node:path';
import { startAasd, newAccount, vmEnv } from './lib/harness.mjs';

const execFileP = promisify(execFile);
const MAX_ENTRIES = 50;
let aasd;
let alice;
let bob;
let sbx;
let tmp;

async function run(command) {
  const r = await fetch(`${aasd.url}/v1/sandboxes/${sbx}/commands`, {
    method: 'POST',
    headers: { 'x-api-key': alice.api_key, 'Content-Type': 'application/json' },
    body: JSON.stringify({ command, timeout_seconds: 120 }),
  });
  assert.equal(r.status, 200);
  const j = await r.json();
  assert.equal(j.exit_code, 0, `${command}: ${j.stderr}`);
  return j.stdout;
}

async function putTree(dir, body, key = alice.api_key, id = sbx) {
  const r = await fetch(`${aasd.url}/v1/sandboxes/${id}/tree?path=${encodeURIComponent(dir)}`, {
    method: 'PUT',
    headers: { 'x-api-key': key, 'Content-Type': 'application/x-tar' },
    body,
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, json, text };
}

// One ustar header block (GNU tar accepts it; checksum computed).
function header(name, { type = '0', size = 0, mode = 0o644, link = '' } = {}) {
  const b = Buffer.alloc(512);
  const put = (off, len, s) => b.write(s, off, Math.min(len, Buffer.byteLength(s)), 'latin1');
  const oct = (off, len, n) => put(off, len, n.toString(8).padStart(len - 1, '0'));
  put(0, 100, name);
  oct(100, 8, mode);
  oct(108, 8, 1000);
  oct(116, 8, 1000);
  oct(124, 12, size);
  oct(136, 12, 1700000000);
  b.fill(0x20, 148, 156);
  put(156, 1, type);
  put(157, 100, link);
  put(257, 6, 'ustar');
  put(263, 2, '00');
  let sum = 0;
  for (const c of b) sum += c;
  put(148, 8, `${sum.toString(8).padStart(6, '0')}\0 `);
  return b;
}

function member(name, content, opts = {}) {
  const data = Buffer.from(content);
  const pad = Buffer.alloc((512 - (data.length % 512)) % 512);
  return Buffer.concat([header(name, { ...opts, size: data.length }), data, pad]);
}

const END = Buffer.alloc(1024);

function sha256(buf) { return createHash('sha256').update(buf).digest('hex'); }

before(async () => {
  tmp = mkdtempSync(path.join(tmpdir(), 'aas-tree-'));
  aasd = await startAasd(vmEnv('tree', { AAS_MAX_TREE_ENTRIES: String(MAX_ENTRIES) }));
  alice = await newAccount();
  bob = await newAccount();
  const r = await fetch(`${aasd.url}/v1/sandboxes`, {
    method: 'POST',
    headers: { 'x-api-key': alice.api_key, 'Content-Type': 'application/json' },
    body: JSON.stringify({ size: 'small', timeout_minutes: 20 }),
  });
  assert.equal(r.status, 201);
  sbx = (await r.json()).sandbox_id;
});

after(async () => {
  if (sbx) {
    await fetch(`${aasd.url}/v1/sandboxes/${sbx}`,
      { method: 'DELETE', headers: { 'x-api-key': alice.api_key } });
  }
  await aasd?.stop();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

test('a GNU tar archive goes in as the sandbox user and comes back the same', async () => {
  const src = path.join(tmp, 'src');
  mkdirSync(path.join(src, 'a/b/c'), { recursive: true });
  mkdirSync(path.join(src, 'empty'));
  writeFileSync(path.join(src, 'a/b/c/deep.txt'), 'deep\n');
  const long = `${'n'.repeat(120)}/${'m'.repeat(150)}.txt`;
  mkdirSync(path.join(src, 'n'.repeat(120)));
  writeFileSync(path.join(src, long), 'long name\n');
  const big = Buffer.alloc(3 * 1024 * 1024 + 7);
  for (let i = 0; i < big.length; i++) big[i] = (i * 7919) & 0xff;
  writeFileSync(path.join(src, 'big.bin'), big);
  writeFileSync(path.join(src, 'run.sh'), '#!/bin/sh\necho ran\n');
  chmodSync(path.join(src, 'run.sh'), 0o4755);
  symlinkSync('a/b/c/deep.txt', path.join(src, 'link'));
  for (const format of ['gnu', 'pax']) {
    const tarFile = path.join(tmp, `src-${format}.tar`);
    await execFileP('tar', ['-c', '-f', tarFile, `--format=${format}`, '-C', src, '.']);
    const dir = `proj-${format}`;
    const r = await putTree(dir, readFileSync(tarFile));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.path, `/home/sandbox/${dir}`);
    assert.equal(r.json.files, 4);
    assert.equal(r.json.symlinks, 1);
    assert.equal(r.json.directories, 5);
    assert.equal(r.json.bytes, big.length + 5 + 10 + 19);
    const out = await run(`cd ${dir} && sha256sum big.bin a/b/c/deep.txt ${long} | cut -c1-64; ` +
      'stat -c "%U %a" run.sh a/b/c/deep.txt; readlink link; ./run.sh; test -d empty && echo E');
    const want = [big, Buffer.from('deep\n'), Buffer.from('long name\n')].map(sha256);
    assert.deepEqual(out.trim().split('\n'),
      [...want, 'sandbox 755', 'sandbox 644', 'a/b/c/deep.txt', 'ran', 'E']);
  }
  // And back: the same bytes, names under the directory.
  const back = await fetch(`${aasd.url}/v1/sandboxes/${sbx}/tree?path=proj-gnu`,
    { headers: { 'x-api-key': alice.api_key } });
  assert.equal(back.status, 200);
  assert.equal(back.headers.get('content-type'), 'application/x-tar');
  const tarBack = path.join(tmp, 'back.tar');
  writeFileSync(tarBack, Buffer.from(await back.arrayBuffer()));
  const dst = path.join(tmp, 'dst');
  mkdirSync(dst);
  await execFileP('tar', ['-x', '-f', tarBack, '-C', dst]);
  assert.deepEqual(readFileSync(path.join(dst, 'big.bin')), big);
  assert.equal(readFileSync(path.join(dst, long), 'utf8'), 'long name\n');
  assert.equal(readlinkSync(path.join(dst, 'link')), 'a/b/c/deep.txt');
  assert.equal(statSync(path.join(dst, 'run.sh')).mode & 0o7777, 0o755);
});

test('an upload merges: other files stay, files of the same name are replaced', async () => {
  await run('mkdir -p merge && echo keep > merge/keep.txt && echo old > merge/same.txt');
  const r = await putTree('merge', Buffer.concat([member('same.txt', 'new\n'),
    member('sub/added.txt', 'added\n'), END]));
  assert.equal(r.status, 200, r.text);
  const out = await run('cd merge && cat keep.txt same.txt sub/added.txt && ls -A | tr "\\n" " "');
  assert.equal(out, 'keep\nnew\nadded\nkeep.txt same.txt sub ');
});

test('a hostile archive is refused naming the member, and nothing changes', async () => {
  await run('mkdir -p safe && echo before > safe/existing.txt');
  const good = member('good.txt', 'should not appear\n');
  const cases = [
    ['../evil.txt', member('../evil.txt', 'x'), /"\.\." in a name|\.\./],
    ['/etc/evil', member('/etc/evil', 'x'), /absolute/],
    ['escape', member('escape', '', { type: '2', link: '../../outside' }), /outside|leaves|escape/],
    ['dev', member('dev', '', { type: '3' }), /device|type/],
    ['fifo', member('fifo', '', { type: '6' }), /FIFO|fifo|type/],
  ];
  for (const [name, bad, why] of cases) {
    const r = await putTree('safe', Buffer.concat([good, bad, END]));
    assert.equal(r.status, 400, `${name}: ${r.text}`);
    assert.equal(r.json.error.field, 'member', r.text);
    assert.ok(r.json.error.message.includes(JSON.stringify(name).slice(1, -1)), r.text);
    assert.match(r.json.error.message, why);
  }
  // Cut in the middle of a member.
  const cut = Buffer.concat([good, member('half.bin', 'y'.repeat(3000))]).subarray(0, 512 * 4);
  const t = await putTree('safe', cut);
  assert.equal(t.status, 400, t.text);
  // Too many members (AAS_MAX_TREE_ENTRIES of this aasd).
  const many = [];
  for (let i = 0; i <= MAX_ENTRIES; i++) many.push(member(`m${i}`, ''));
  const m = await putTree('safe', Buffer.concat([...many, END]));
  assert.equal(m.status, 400, m.text);
  assert.match(m.json.error.message, /AAS_MAX_TREE_ENTRIES|members/);
  // Not a tar stream at all.
  const junk = await putTree('safe', Buffer.alloc(2048, 0x41));
  assert.equal(junk.status, 400, junk.text);
  // Nothing changed, no stage left, nothing escaped.
  const out = await run('ls -A safe | tr "\\n" " "; ls -A /home/sandbox | grep -c aas-tree || :; ' +
    'test -e /home/evil.txt && echo ESCAPED || :');
  assert.equal(out, 'existing.txt 0\n');
});

test('a new directory refused part way is not created; a file as the directory is 400', async () => {
  const r = await putTree('fresh/deeper', Buffer.concat([member('ok.txt', 'ok'),
    member('a/../../x', 'x'), END]));
  assert.equal(r.status, 400, r.text);
  assert.equal(await run('test -e fresh && echo THERE || echo absent'), 'absent\n');
  await run('echo f > plainfile');
  const f = await putTree('plainfile', Buffer.concat([member('x.txt', 'x'), END]));
  assert.equal(f.status, 400, f.text);
  assert.equal(f.json.error.field, 'path', f.text);
  assert.equal(await run('cat plainfile; ls -A | grep -c aas-tree || :'), 'f\n0\n');
});

test('a download leaves FIFOs out and clears set-id bits', async () => {
  await run('mkdir -p dl && cd dl && echo hi > f.txt && mkfifo pipe && ' +
    'cp /bin/true suid && chmod 4755 suid');
  const r = await fetch(`${aasd.url}/v1/sandboxes/${sbx}/tree?path=dl`,
    { headers: { 'x-api-key': alice.api_key } });
  assert.equal(r.status, 200);
  const f = path.join(tmp, 'dl.tar');
  writeFileSync(f, Buffer.from(await r.arrayBuffer()));
  const { stdout } = await execFileP('tar', ['-t', '-v', '-f', f]);
  const lines = stdout.trim().split('\n');
  assert.deepEqual(lines.map((l) => l.split(/\s+/).pop()).sort(), ['f.txt', 'suid']);
  const suid = lines.find((l) => l.endsWith('suid'));
  assert.match(suid, /^-rwxr-xr-x /);
  // A missing directory is an error before any byte.
  const missing = await fetch(`${aasd.url}/v1/sandboxes/${sbx}/tree?path=nope`,
    { headers: { 'x-api-key': alice.api_key } });
  assert.equal(missing.status, 400);
  assert.equal((await missing.json()).error.field, 'path');
});

test('a download leaves out what exclude names, at any depth; a bad list is 400', async () => {
  await run('mkdir -p ex/a/node_modules/m ex/b && cd ex && echo k > keep.txt && echo m > a/node_modules/m/i.js' +
    ' && echo c > b/x.pyc && echo d > b/y.py');
  const get = (q) => fetch(`${aasd.url}/v1/sandboxes/${sbx}/tree?path=ex&${q}`,
    { headers: { 'x-api-key': alice.api_key } });
  const r = await get(`exclude=${encodeURIComponent('node_modules,*.pyc')}`);
  assert.equal(r.status, 200);
  const f = path.join(tmp, 'ex.tar');
  writeFileSync(f, Buffer.from(await r.arrayBuffer()));
  const { stdout } = await execFileP('tar', ['-t', '-f', f]);
  const names = stdout.trim().split('\n').filter((n) => !n.endsWith('/')).sort();
  assert.deepEqual(names, ['b/y.py', 'keep.txt']);
  for (const bad of ['a,,b', ',', `${'x'.repeat(256)}`]) {
    const b = await get(`exclude=${encodeURIComponent(bad)}`);
    assert.equal(b.status, 400, bad);
    assert.equal((await b.json()).error.field, 'exclude');
  }
});

test('another account\'s sandbox is 404, no key is 401, PUT needs a path', async () => {
  const tar = Buffer.concat([member('x.txt', 'x'), END]);
  assert.equal((await putTree('x', tar, bob.api_key)).status, 404);
  const g = await fetch(`${aasd.url}/v1/sandboxes/${sbx}/tree`, { headers: { 'x-api-key': bob.api_key } });
  assert.equal(g.status, 404);
  const anon = await fetch(`${aasd.url}/v1/sandboxes/${sbx}/tree`);
  assert.equal(anon.status, 401);
  const nopath = await fetch(`${aasd.url}/v1/sandboxes/${sbx}/tree`, {
    method: 'PUT', headers: { 'x-api-key': alice.api_key }, body: tar });
  assert.equal(nopath.status, 400);
  assert.equal((await nopath.json()).error.field, 'path');
});

test('a client that goes away part way through a large download stops the guest\'s tar', async () => {
  // The whole root file system is far more than is read here.
  const sock = net.connect(aasd.port, '127.0.0.1');
  await new Promise((r) => sock.once('connect', r));
  sock.write(`GET /v1/sandboxes/${sbx}/tree?path=/ HTTP/1.1\r\nHost: x\r\nx-api-key: ${alice.api_key}\r\n\r\n`);
  let got = 0;
  await new Promise((resolve) => {
    sock.on('data', (d) => {
      got += d.length;
      if (got > 256 * 1024) { sock.destroy(); resolve(); }
    });
    sock.on('close', resolve);
  });
  assert.ok(got > 256 * 1024, `only ${got} bytes came`);
  // The archive's tar ends within seconds; nothing else is left running.
  let left = '';
  for (let i = 0; i < 40; i++) {
    left = await run('pgrep -x tar || :');
    if (left === '') break;
    await new Promise((r) => setTimeout(r, 250));
  }
  assert.equal(left, '');
  const h = await fetch(`${aasd.url}/healthz`);
  assert.equal(h.status, 200);
});
