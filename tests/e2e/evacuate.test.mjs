// Evacuating a host: its sandboxes move, running, to another host (libvirt
// live migration between two daemons of their own, lib/hostd.mjs) and keep
// their processes, files, id, expiry and preview URL. The second host lives
// in a network namespace made here (a /24 in 10.99.128.0/17, outside the VM
// tests' AAS_NET_ALLOW), so its forwards listen on its own private address
// and the gateway reaches its previews there; until the isolation rule is
// installed in that namespace and recorded (the operator's install step),
// no sandbox with a network device goes there. A sandbox that cannot move
// is reported and keeps running.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import path from 'node:path';
import {
  BUILD, TEST_NET_ALLOW, aasctl, aasctlFail, countsPast, newAccount, psql, sleep, startAasd, toolCaller, vmEnv,
} from './lib/harness.mjs';
import { makeNetns, startHostd } from './lib/hostd.mjs';

const run = promisify(execFile);

function freeSubnet() {
  const used = execFileSync('ip', ['-4', '-o', 'addr', 'show'], { encoding: 'utf8' });
  for (let i = 0; i < 127; i++) {
    const n = 128 + ((process.pid + i) % 127);
    if (!used.includes(` 10.99.${n}.`)) return n;
  }
  throw new Error('no free /24 in 10.99.128.0/17');
}

let A;
let B;
let NET;

before(async () => {
  const n = freeSubnet();
  NET = makeNetns('evac', `10.99.${n}.1`, `10.99.${n}.2`);
  A = await startHostd('evac-a');
  B = await startHostd('evac-b', { netns: NET });
});

after(async () => {
  await A?.stop();
  await B?.stop();
  NET?.remove();
});

async function until(what, fn, ms = 60000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => null);
    if (v) return v;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(250);
  }
}

// The page behind a preview URL, fetched through aasd's gateway.
async function preview(srv, id, port) {
  const { stdout } = await run('curl', ['-sS', '--max-time', '10', '-H',
    `Host: ${port}-${id}.localhost:${srv.port}`, `${srv.url}/`]);
  return stdout;
}

async function qemuPid(id) {
  const { stdout } = await run('pgrep', ['-f', `qemu-system.*${id}`]).catch(() => ({ stdout: '' }));
  return stdout.trim().split('\n').filter(Boolean).map(Number);
}

test('evacuating a host moves a running sandbox with its processes, files and preview; one that cannot move is reported and runs on', async () => {
  const srv = await startAasd(vmEnv('evac', { AAS_LIBVIRT_URI: `${A.uri},${B.uri}` }));
  const acct = await newAccount();
  const call = await toolCaller(srv, acct);
  const ok = async (name, args) => {
    const r = await call(name, args);
    assert.equal(r.isError, false, `${name}: ${r.text}`);
    return r.json;
  };
  let id;
  const ruleEnv = { PATH: process.env.PATH, AAS_NET_ALLOW: TEST_NET_ALLOW };
  const aasdBin = path.join(BUILD, 'aasd');
  try {
    // A shares this machine's network and its rule (aasd's own).
    await aasctl('host', 'add', A.uri, '--name', 'evac-a', '--preview-address', NET.host,
      '--isolation-rule', A.installRule(aasdBin, ruleEnv));
    // B has more room but no rule yet: the sandbox goes to A.
    await aasctl('host', 'add', B.uri, '--name', 'evac-b', '--preview-address', NET.peer);
    await until('B to be polled', async () =>
      (await aasctl('host', 'list')).find((h) => h.name === 'evac-b').capacity.memory_mib > 0);
    id = (await ok('create_sandbox', { size: 'small', timeout_minutes: 30 })).sandbox_id;
    assert.equal(await psql(`select host_uri from sandboxes where id = '${id}'`), A.uri);
    const expires = await psql(`select expires_at from sandboxes where id = '${id}'`);
    await ok('write_file', { sandbox_id: id, path: 'www/index.html', content: 'page from before the move\n' });
    await ok('run_command', { sandbox_id: id, background: true, timeout_seconds: 3600,
      command: 'i=0; while :; do i=$((i+1)); echo $i > ~/count; sleep 0.2; done' });
    await ok('run_command', { sandbox_id: id, background: true, timeout_seconds: 3600,
      command: 'cd ~/www && exec python3 -m http.server 8000' });
    const ex = await ok('expose_port', { sandbox_id: id, port: 8000 });
    assert.equal(await until('the preview on host A', async () =>
      (await preview(srv, id, 8000)).includes('before the move') && 'ok'), 'ok');
    const count = async () => Number((await ok('run_command', { sandbox_id: id, command: 'cat ~/count' })).stdout);

    // Nowhere to go (B has no isolation rule): reported, not killed.
    const refused = await aasctlFail('host', 'evacuate', 'evac-a', '--wait', '60');
    assert.equal(refused.code, 1, refused.stderr);
    const report = JSON.parse(refused.stdout);
    assert.equal(report.moved, 0);
    assert.deepEqual(report.not_moved.map((x) => x.sandbox_id), [id]);
    assert.match(report.not_moved[0].error, /no other host has room .*isolation rule/);
    assert.equal(await psql(`select state from sandboxes where id = '${id}'`), 'running');
    const c0 = await count();
    assert.ok(c0 > 0);

    // The rule installed in B's namespace and recorded: it moves, live.
    await aasctl('host', 'add', B.uri, '--isolation-rule', B.installRule(aasdBin, ruleEnv));
    const { stdout: rules } = await run('nsenter', [`--net=${NET.path}`, 'nft', 'list', 'table', 'inet', 'aas_guard']);
    assert.match(rules, /meta skuid/, 'the rule is in force on B');
    const ev = await aasctl('host', 'evacuate', 'evac-a', '--wait', '300');
    assert.deepEqual({ moved: ev.moved, waiting: ev.waiting, moving: ev.moving, not_moved: ev.not_moved },
      { moved: 1, waiting: 0, moving: 0, not_moved: [] }, JSON.stringify(ev));
    assert.equal(await psql(`select host_uri from sandboxes where id = '${id}'`), B.uri);
    assert.equal(await psql(`select expires_at from sandboxes where id = '${id}'`), expires);
    // Its QEMU now runs in B's network namespace, and only there.
    const pids = await qemuPid(id);
    assert.equal(pids.length, 1, `one QEMU for ${id}: ${pids}`);
    const inNs = execFileSync('ip', ['netns', 'pids', NET.ns], { encoding: 'utf8' }).split('\n').map(Number);
    assert.ok(inNs.includes(pids[0]), 'the moved VM runs on host B');
    // The counter kept counting: the same process, on the other host.
    const c1 = await count();
    assert.ok(c1 > c0, `counter ${c0} -> ${c1}`);
    assert.ok(await countsPast(count, c1, 1000), `counter ${c1}: it counts on`);
    const g = await ok('get_sandbox', { sandbox_id: id });
    assert.equal(g.state, 'running');
    assert.deepEqual(g.ports.map((p) => p.url), [ex.url]);
    assert.equal((await ok('read_file', { sandbox_id: id, path: 'www/index.html' })).content,
      'page from before the move\n');
    // The same preview URL, now served from B's private address.
    assert.equal(await until('the preview on host B', async () =>
      (await preview(srv, id, 8000)).includes('before the move') && 'ok'), 'ok');
    const hp = await psql(`select host_port from sandbox_ports where sandbox_id = '${id}'`);
    const { stdout: listening } = await run('nsenter', [`--net=${NET.path}`, 'ss', '-Hltn']);
    assert.ok(listening.includes(`${NET.peer}:${hp}`), `forward on ${NET.peer}:${hp}:\n${listening}`);
    const hosts = await aasctl('host', 'list');
    const a = hosts.find((h) => h.name === 'evac-a');
    assert.equal(a.evacuating, true);
    assert.equal(a.sandboxes, 0);
  } finally {
    if (id) await call('destroy_sandbox', { sandbox_id: id });
    await srv.stop();
    for (const h of ['evac-a', 'evac-b']) await aasctl('host', 'remove', h).catch(() => {});
  }
});
