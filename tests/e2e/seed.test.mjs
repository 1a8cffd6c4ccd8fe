// The product page's instructions for agents, followed as written, with a
// real VM (TCG):
//   - code runs as an unprivileged user; there is no sudo, so use
//     `pip install --user --break-system-packages` or `npm install`;
//   - run_command waits for the command to finish: start services with `&`.
// A server started with `&` (or nohup, setsid, disown) keeps answering
// after the call returned, inside the sandbox and through its preview URL,
// and its log lines go on into the command's logs. The pip index is a
// stand-in in a network namespace made here (lib/netns.mjs); the npm
// package is a local tarball. Nothing leaves this machine.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startAasd, newAccount, vmEnv, toolCaller, waitFor } from './lib/harness.mjs';
import { makeNetns } from './lib/netns.mjs';

const run = promisify(execFile);
const LONG = { timeout: 600000 };
const INDEX_PORT = 8080;

let aasd;
let tool;
let sbx;
let inet;
let tmp;

// A pure-Python wheel and a PEP 503 index page for it, made with the
// host's python3 (a wheel is a zip with a RECORD of hashes).
const WHEEL_SCRIPT = `
import base64, hashlib, os, sys, zipfile
root = sys.argv[1]
name, ver = 'aas_seed_pkg', '1.0'
whl = f'{name}-{ver}-py3-none-any.whl'
info = f'{name}-{ver}.dist-info'
files = {
  f'{name}/__init__.py': b'VALUE = "from-the-local-index"\\n',
  f'{info}/METADATA': b'Metadata-Version: 2.1\\nName: aas-seed-pkg\\nVersion: 1.0\\n',
  f'{info}/WHEEL': b'Wheel-Version: 1.0\\nGenerator: aas-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n',
}
record = []
for p, b in files.items():
  h = base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b'=').decode()
  record.append(f'{p},sha256={h},{len(b)}')
record.append(f'{info}/RECORD,,')
files[f'{info}/RECORD'] = ('\\n'.join(record) + '\\n').encode()
with zipfile.ZipFile(os.path.join(root, whl), 'w') as z:
  for p, b in files.items():
    z.writestr(p, b)
os.makedirs(os.path.join(root, 'simple', 'aas-seed-pkg'))
with open(os.path.join(root, 'simple', 'aas-seed-pkg', 'index.html'), 'w') as f:
  f.write(f'<!doctype html><a href="../../{whl}">{whl}</a>\\n')
`;

async function ok(name, args) {
  const r = await tool(name, args);
  assert.ok(!r.isError, `${name}: ${r.text}`);
  return r.json;
}

async function sh(command, timeout = 120) {
  return ok('run_command', { sandbox_id: sbx, command, timeout_seconds: timeout });
}

// curl through aasd with the preview's Host header: { status, body }.
async function preview(port, urlPath = '/') {
  const { stdout } = await run('curl', ['-sS', '--max-time', '30', '-o', '-', '-w', '\n%{http_code}',
    '-H', `Host: ${port}-${sbx}.localhost:${aasd.port}`, `${aasd.url}${urlPath}`]);
  const nl = stdout.lastIndexOf('\n');
  return { status: Number(stdout.slice(nl + 1)), body: stdout.slice(0, nl) };
}

before(async () => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'aas-seed-'));
  const index = path.join(tmp, 'index');
  mkdirSync(index);
  await run('python3', ['-c', WHEEL_SCRIPT, index]);
  inet = await makeNetns('seed');
  inet.spawn(['python3', '-m', 'http.server', String(INDEX_PORT), '--bind', inet.peer,
    '--directory', index]);
  await waitFor('the stand-in index', async () => run('curl', ['-sf', '-m', '2',
    `http://${inet.peer}:${INDEX_PORT}/simple/aas-seed-pkg/`]).then(() => true, () => false), 20000);

  aasd = await startAasd(vmEnv('seed'));
  tool = await toolCaller(aasd, await newAccount());
  const c = await ok('create_sandbox', { size: 'small', timeout_minutes: 30, internet: true });
  sbx = c.sandbox_id;
});

after(async () => {
  if (sbx) await tool('destroy_sandbox', { sandbox_id: sbx }).catch(() => {});
  await aasd?.stop();
  inet?.remove();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

const CURL_LOCAL = (port) => `curl -s -o /dev/null -w '%{http_code}\\n' --retry 30 `
  + `--retry-connrefused --retry-delay 1 http://localhost:${port}/`;

test('a server started with & as the page says keeps answering, inside and through its preview', LONG,
  async () => {
    const t0 = Date.now();
    const started = await sh('cd /tmp && python3 -m http.server 8000 &');
    assert.equal(started.exit_code, 0);
    // The call returned once the command's own shell ended, not at its timeout.
    assert.ok(Date.now() - t0 < 30000, `run_command took ${Date.now() - t0} ms`);
    // Three requests: each one makes the server write a log line to the
    // stdout and stderr it inherited from the finished command.
    const inside = await sh(`for i in 1 2 3; do ${CURL_LOCAL(8000)}; done`);
    assert.equal(inside.stdout, '200\n200\n200\n', inside.stderr);
    await ok('expose_port', { sandbox_id: sbx, port: 8000 });
    for (let i = 0; i < 3; i++) {
      const r = await preview(8000);
      assert.equal(r.status, 200, r.body);
      assert.match(r.body, /Directory listing for \//);
    }
    // Its log lines went on into the command's record.
    const log = await ok('get_command', { sandbox_id: sbx, command_id: started.command_id });
    const lines = log.stderr.match(/"GET \/ HTTP\/1\.1" 200/g) ?? [];
    assert.ok(lines.length >= 6, log.stderr);
  });

test('nohup, setsid and disown servers keep answering after their call', LONG, async () => {
  for (const [port, command] of [
    [8001, 'nohup python3 -m http.server 8001 &'],
    [8002, 'setsid python3 -m http.server 8002 &'],
    [8003, 'python3 -m http.server 8003 & disown'],
  ]) {
    const r = await sh(`cd /tmp && ${command}`);
    assert.equal(r.exit_code, 0, `${command}: ${r.stderr}`);
  }
  const inside = await sh([8001, 8002, 8003].map((p) => `${CURL_LOCAL(p)}; ${CURL_LOCAL(p)}`).join('; '));
  assert.equal(inside.stdout, '200\n'.repeat(6), inside.stderr);
});

test('pip install --user --break-system-packages from an index, as the page says', LONG, async () => {
  const r = await sh(`pip install --user --break-system-packages --index-url http://${inet.peer}:${INDEX_PORT}/simple/ `
    + `--trusted-host ${inet.peer} aas-seed-pkg && python3 -c 'import aas_seed_pkg; print(aas_seed_pkg.VALUE)'`, 300);
  assert.equal(r.exit_code, 0, r.stderr);
  assert.match(r.stdout, /from-the-local-index\n$/);
  // As the sandbox user, into its own site-packages.
  const where = await sh("python3 -c 'import aas_seed_pkg; print(aas_seed_pkg.__file__)'");
  assert.match(where.stdout, /^\/home\/sandbox\/\.local\/lib\/python3[^/]*\/site-packages\/aas_seed_pkg\//);
});

test('npm install of a local package tarball, as the page says', LONG, async () => {
  const pkg = path.join(tmp, 'npm-pkg');
  mkdirSync(pkg);
  writeFileSync(path.join(pkg, 'package.json'),
    JSON.stringify({ name: 'aas-seed-npm', version: '1.0.0', main: 'index.js' }));
  writeFileSync(path.join(pkg, 'index.js'), "module.exports = { value: 'from-the-tarball' };\n");
  await run('npm', ['pack', '--silent'], { cwd: pkg });
  const tgz = readFileSync(path.join(pkg, 'aas-seed-npm-1.0.0.tgz'));
  await ok('write_file', { sandbox_id: sbx, path: '/home/sandbox/aas-seed-npm-1.0.0.tgz',
    content_base64: tgz.toString('base64') });
  const r = await sh('mkdir -p ~/app && cd ~/app && npm install --no-audit --no-fund --no-update-notifier '
    + "~/aas-seed-npm-1.0.0.tgz && node -e \"console.log(require('aas-seed-npm').value)\"", 300);
  assert.equal(r.exit_code, 0, r.stderr);
  assert.match(r.stdout, /from-the-tarball\n$/);
});

test('a preview that gets no answer says why: nothing listening, loopback only, paused', LONG, async () => {
  await ok('expose_port', { sandbox_id: sbx, port: 8999 });
  const none = await preview(8999);
  assert.equal(none.status, 502);
  assert.match(none.body, /Nothing is listening on port 8999 inside the sandbox/);
  await sh('cd /tmp && python3 -m http.server 8998 --bind 127.0.0.1 &');
  await sh(CURL_LOCAL(8998));
  await ok('expose_port', { sandbox_id: sbx, port: 8998 });
  const lo = await preview(8998);
  assert.equal(lo.status, 502);
  assert.match(lo.body, /only on 127\.0\.0\.1/);
  await ok('pause_sandbox', { sandbox_id: sbx });
  const paused = await preview(8000);
  assert.equal(paused.status, 503);
  assert.match(paused.body, /The sandbox is paused/);
  await ok('resume_sandbox', { sandbox_id: sbx });
  // The server started with & came back with the sandbox.
  const back = await waitFor('the preview after resume', async () => {
    const r = await preview(8000).catch(() => null);
    return r?.status === 200 && r;
  }, 60000);
  assert.match(back.body, /Directory listing for \//);
});
