// Production-shaped: aasd run as deploy/aasd.service runs it (lib/unit.mjs:
// user aas, CAP_CHOWN and CAP_DAC_OVERRIDE only, NoNewPrivileges, a
// read-only system but its state directory and /run/aas-vm, a private /tmp,
// no /home or /root), against a libvirt system daemon of its own
// (lib/hostd.mjs, reached as qemu+unix:///system, its socket open to group
// aas as Debian's is to group libvirt), with the isolation rule kept by the
// privileged watcher `aasd --netguard-watch` (root, as aas-netguard.service),
// behind nginx configured from deploy/nginx/ (lib/nginx.mjs) with a test CA.
// Every request goes through nginx: /healthz, the dashboard's sign-up and
// key, MCP tools on one sandbox with internet (commands, files, a preview
// over https and one over wss, the terminal over wss, pause and resume, an aasd restart
// under it), a snapshot and its fork, destroy, and the ledger.
//
// Emulated by lib/unit.mjs: User/Group, AmbientCapabilities and
// CapabilityBoundingSet, NoNewPrivileges, ProtectSystem=strict with
// ReadWritePaths and StateDirectory, ProtectHome, PrivateTmp,
// PrivateDevices, ProtectProc, the read-only /sys and /proc/sys
// of ProtectKernelTunables and ProtectControlGroups, UMask, LimitNOFILE
// (up to this machine's hard limit), WorkingDirectory.
// Not emulated without systemd (the unit has them, this test does not):
// SystemCallFilter=@system-service and SystemCallArchitectures=native
// (seccomp), MemoryDenyWriteExecute, RestrictAddressFamilies,
// RestrictNamespaces, RestrictRealtime, RestrictSUIDSGID, LockPersonality,
// ProtectKernelModules/Logs, ProtectClock, ProtectHostname, the rest of
// ProtectKernelTunables (/proc/sysrq-trigger, /proc/irq ...), RemoveIPC,
// SupplementaryGroups=libvirt where there is no such group (the libvirt
// socket is given to group aas instead), the unit's cgroup, ordering
// (After=, Wants=) and Restart=on-failure. nginx runs as root on high ports
// of 127.0.0.1 (not 443), so aas's URLs carry a port and the preview domain
// is given without one: nginx passes $host, which has none.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdirSync, rmSync, existsSync } from 'node:fs';
import path from 'node:path';
import {
  BUILD, DB_URL, STATE, TEST_NET_ALLOW, aasctl, baseEnv, freePort, psql, sleep, startAasd, toolCaller, vmEnv,
  waitFor,
} from './lib/harness.mjs';
import { startHostd } from './lib/hostd.mjs';
import { makeCerts, writeNginxConf, startNginx, tlsFetch } from './lib/nginx.mjs';
import { unitDirs, unitWrap } from './lib/unit.mjs';
import { startSmtpSink } from './lib/smtp.mjs';
import { WebClient, GOOD_PASSWORD, linkIn, randomEmail, signUpAndLogIn } from './lib/web.mjs';
import { wsConnect, WS_ECHO_SERVER } from './lib/ws.mjs';

const run = promisify(execFile);
const API = 'api.aas.test';
const PREVIEW = 'preview.aas.test';
const SD = path.join(STATE, 'prod');           // AAS_STATE_DIR, as /var/lib/aas
const RUN_VM = path.join(STATE, 'prod-run-aas-vm'); // mounted on /run/aas-vm
const NGX = path.join(STATE, 'prod-nginx');
// As /run/aas-netguard: root's, outside what aasd may write, so aasd
// cannot forge the watcher's word.
const NETGUARD_STATUS = path.join(STATE, 'prod-netguard', 'status');

// On cgroup v1 the OOM watch writes the VM's cgroup.event_control, which
// ProtectControlGroups (emulated: /sys/fs/cgroup read-only) forbids but for
// the machine slice the unit's ReadWritePaths= leaves writable.
const CGROUP_V1 = !existsSync('/sys/fs/cgroup/cgroup.controllers');

let host;       // the libvirt system daemon
let smtp;
let nginx;
let watcher;    // aasd --netguard-watch
let watcherLog = '';
let srv;        // aasd under the unit
let env;
let tls;        // { port, fetch, caPem }
let base;       // https://api.aas.test:<port>
let call;       // MCP tools through nginx
let acct;       // { account_id, api_key }: made on the dashboard
let sbx;        // the sandbox most steps share
let netOk = false;
const made = [];

async function ok(name, args) {
  const r = await call(name, args);
  assert.equal(r.isError, false, `${name}: ${r.text.slice(0, 500)}\n--- aasd log ---\n${srv.log().slice(-3000)}`);
  return r.json;
}

async function sh(command, extra = {}) {
  return ok('run_command', { sandbox_id: sbx, command, timeout_seconds: 60, ...extra });
}

async function ledgerMatchesBalance() {
  assert.equal(await psql(`select coalesce(sum(amount), 0) from ledger where account_id = '${acct.account_id}'`),
    await psql(`select balance from accounts where id = '${acct.account_id}'`), 'ledger equals balance');
}

// One request through nginx: { status, headers, text, json }.
async function get(url, headers = {}) {
  const r = await tls.fetch(url, { headers });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, headers: r.headers, text, json };
}

// On the port nginx proxies to, also after a restart.
function startUnitAasd(extra = {}) {
  return startAasd({ ...env, ...extra }, { wrap: unitWrap(SD, RUN_VM), port: Number(env.AAS_LISTEN.split(':')[1]) });
}

// The privileged watcher, as root with aasd's settings. On a main without
// it, it exits at once with aasd's usage, and the internet steps fail.
function startWatcher() {
  const p = spawn(path.join(BUILD, 'aasd'), ['--netguard-watch'], {
    env: baseEnv(env), stdio: ['ignore', 'pipe', 'pipe'],
  });
  p.stdout.on('data', (d) => { watcherLog += d; });
  p.stderr.on('data', (d) => { watcherLog += d; });
  p.exited = new Promise((r) => p.on('exit', r));
  return p;
}

before(async () => {
  for (const d of [SD, RUN_VM, NGX, path.dirname(NETGUARD_STATUS)]) rmSync(d, { recursive: true, force: true });
  unitDirs(SD, RUN_VM);
  // libvirt's v1 memory slice (machine, without systemd), made before aasd
  // starts as a host's first VM would have: the unit leaves it writable.
  if (CGROUP_V1) mkdirSync('/sys/fs/cgroup/memory/machine', { recursive: true });
  mkdirSync(path.dirname(NETGUARD_STATUS), { recursive: true, mode: 0o755 });
  host = await startHostd('prod', { sockGroup: 'aas', binds: [[RUN_VM, '/run/aas-vm']] });
  smtp = await startSmtpSink();
  const [port, httpPort, aasdPort] = [await freePort(), await freePort(), await freePort()];
  base = `https://${API}:${port}`;
  env = vmEnv('prod', {
    AAS_LIBVIRT_URI: host.uri,
    AAS_STATE_DIR: SD,
    AAS_DATABASE_URL: DB_URL,
    AAS_LISTEN: `127.0.0.1:${aasdPort}`,
    AAS_PUBLIC_URL: base,
    AAS_PREVIEW_DOMAIN: PREVIEW,
    AAS_PREVIEW_SCHEME: 'https',
    AAS_TRUST_X_REAL_IP: '1',
    AAS_QEMU_USER: 'aas-qemu',
    AAS_SMTP_URL: smtp.url,
    AAS_ARGON2_M_KIB: '8192',
    AAS_ARGON2_T_COST: '1',
    AAS_NETGUARD_STATUS: NETGUARD_STATUS,
  });
  // The operator's step for a host reached by URI (docs/operations.md,
  // "Hypervisor hosts"): the rule is on this machine, recorded by hash.
  const ruleEnv = { PATH: process.env.PATH, AAS_NET_ALLOW: TEST_NET_ALLOW, AAS_DATABASE_URL: DB_URL };
  await aasctl('host', 'add', host.uri, '--isolation-rule', host.installRule(path.join(BUILD, 'aasd'), ruleEnv));
  watcher = startWatcher();
  // aasd.service comes after aas-netguard.service: its first status is
  // there when aasd starts (unless the watcher failed, which a step names).
  await waitFor('the watcher\'s status', () => existsSync(NETGUARD_STATUS) || watcher.exitCode !== null, 15000)
    .catch(() => {});
  srv = await startUnitAasd();
  const certs = makeCerts(path.join(NGX, 'tls'), [API, `*.${PREVIEW}`]);
  const conf = writeNginxConf(NGX, { api: API, preview: PREVIEW, port, httpPort, upstreamPort: aasdPort, certs });
  nginx = await startNginx(conf, port);
  tls = { port, caPem: certs.caPem, fetch: tlsFetch(port, certs.caPem) };
});

after(async () => {
  // Whatever failed, nothing stays running.
  for (const { id } of made) await call?.('destroy_sandbox', { sandbox_id: id }).catch(() => {});
  await srv?.stop().catch((e) => { console.log(`aasd stop: ${e.message}`); return srv.kill(); });
  if (watcher && watcher.exitCode === null) { watcher.kill('SIGTERM'); await watcher.exited; }
  await nginx?.stop();
  await smtp?.stop();
  await host?.stop();
  await aasctl('host', 'remove', host?.uri ?? '').catch(() => {});
  // QEMU outlives aasd and libvirtd: a VM still running (aasd died before
  // destroying it) is ended here and fails the file.
  const { stdout } = await run('pgrep', ['-f', `qemu-system.*${SD}/vms/`]).catch(() => ({ stdout: '' }));
  const left = stdout.split('\n').filter(Boolean).map(Number);
  for (const pid of left) { try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } }
  assert.deepEqual(left, [], 'VMs left running');
});

test('healthz through nginx answers with the VM layer up; /metrics is not exposed', async () => {
  // The VM layer answers once libvirt did (seconds after the start).
  let h;
  await waitFor('the VM layer', async () => {
    h = await get(`${base}/healthz`);
    return h.json?.vm?.status === 'ok' && h.json?.missing?.length === 0;
  }, 60000).catch(() => assert.fail(`healthz: ${h?.status} ${h?.text}\n--- watcher ---\n${watcherLog.slice(-1500)}`
    + `\n--- aasd ---\n${srv.log().slice(-2000)}`));
  assert.equal(h.status, 200, h.text);
  assert.equal(h.json.features?.internet?.status, 'ok', 'the watcher\'s status is trusted');
  assert.match(h.headers.get('strict-transport-security') ?? '', /max-age=/, 'nginx adds HSTS');
  assert.equal((await get(`${base}/metrics`)).status, 404, 'nginx hides /metrics');
});

test('aasd --check-deployment, run as the unit runs aasd, finds every feature usable', async () => {
  const argv = unitWrap(SD, RUN_VM)([path.join(BUILD, 'aasd'), '--check-deployment']);
  const r = await new Promise((resolve) => {
    const p = spawn(argv[0], argv.slice(1), { env: baseEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { out += d; });
    p.on('exit', (code) => resolve({ code, out }));
  });
  assert.equal(r.code, 0, `--check-deployment:\n${r.out}`);
  assert.doesNotMatch(r.out, /^missing/m, r.out);
  for (const f of ['database', 'libvirt', 'state_dir', 'vm_sockets', 'vm_users', 'internet']) {
    assert.match(r.out, new RegExp(`^ok +${f} `, 'm'), `${f}:\n${r.out}`);
  }
  assert.match(r.out, /^ok +oom_reason /m, r.out);
});

test('sign up, verify and make a key on the dashboard through nginx', async () => {
  const web = new WebClient(base, tls.fetch);
  const email = randomEmail('prod');
  // A browser sends its Origin on every POST: the public URL.
  const origin = { Origin: base };
  const post = web.post.bind(web);
  web.post = (p, f, h = {}) => post(p, f, { ...origin, ...h });
  await signUpAndLogIn(web, email, GOOD_PASSWORD);
  const mail = await smtp.waitFor(email, { subject: 'Verify' });
  const link = linkIn(mail, '/verify?code=');
  assert.equal(link.origin, base, 'the mail links to the public URL');
  const v = await web.openLink(link);
  assert.match(v.text, /verified/, `verify: ${v.status} ${v.text.slice(0, 300)}`);
  const k = await web.submit('/dashboard/keys', '/dashboard/keys', { name: 'prod test' });
  const key = k.text.match(/id="new-key"[^>]*>\s*(aas_sk_[A-Za-z0-9_-]{43})/)?.[1];
  assert.ok(key, `no new key on the page: ${k.status} ${k.text.slice(0, 500)}`);
  acct = { api_key: key, account_id: await psql(`select id from accounts where email = '${email}'`) };
  call = await toolCaller({ mcpUrl: `${base}/v1/mcp`, fetch: tls.fetch }, acct);
});

test('create_sandbox with internet: true gets a network device under the unit', async () => {
  const r = await call('create_sandbox', { size: 'small', timeout_minutes: 20, internet: true });
  if (r.isError) {
    // The rest still runs on a sandbox without one.
    const x = await ok('create_sandbox', { size: 'small', timeout_minutes: 20, internet: false });
    sbx = x.sandbox_id;
    made.push({ id: sbx });
    assert.fail(`internet: true refused under the unit: ${r.text}\n--- watcher ---\n${watcherLog.slice(-1500)}`);
  }
  sbx = r.json.sandbox_id;
  made.push({ id: sbx });
  assert.notEqual(r.json.network, 'none', `network: ${JSON.stringify(r.json)}`);
  assert.equal(r.json.network, 'nat');
  netOk = true;
});

test('run_command, write_file/read_file and list_files', async () => {
  const r = await sh('echo "$(id -un) $((6*7))"');
  assert.equal(r.stdout, 'sandbox 42\n');
  await ok('write_file', { sandbox_id: sbx, path: '/home/sandbox/tree/a/b/note.txt', content: 'hello prod\n' });
  await ok('write_file', { sandbox_id: sbx, path: '/home/sandbox/tree/top.txt', content: 'top\n' });
  const f = await ok('read_file', { sandbox_id: sbx, path: '/home/sandbox/tree/a/b/note.txt' });
  assert.equal(f.content, 'hello prod\n');
  const l = await ok('list_files', { sandbox_id: sbx, path: '/home/sandbox/tree', depth: 3 });
  const paths = l.entries.map((e) => e.path).sort();
  assert.deepEqual(paths.filter((p) => p.endsWith('.txt')).map((p) => p.replace(/^.*\/tree\//, '')),
    ['a/b/note.txt', 'top.txt'], `entries: ${JSON.stringify(paths)}`);
});

test('expose_port: a guest web server answers at its https preview URL through nginx', async () => {
  assert.ok(netOk, 'no network device: nothing to expose');
  await sh('mkdir -p ~/www && echo preview-ok > ~/www/index.html');
  await sh('cd ~/www && exec python3 -m http.server 8000', { background: true, timeout_seconds: 1200 });
  const ex = await ok('expose_port', { sandbox_id: sbx, port: 8000 });
  assert.equal(ex.url, `https://8000-${sbx}.${PREVIEW}/`);
  // The same name on nginx's port.
  const url = `https://8000-${sbx}.${PREVIEW}:${tls.port}/index.html`;
  const page = await waitFor('the preview', async () => {
    const p = await get(url).catch(() => null);
    return p?.status === 200 && p;
  }, 60000).catch(async () => assert.fail(`preview: ${JSON.stringify(await get(url).catch((e) => e.message))}`));
  assert.equal(page.text, 'preview-ok\n');
});

test('a WebSocket server in the guest answers at its preview over wss through nginx', async () => {
  assert.ok(netOk, 'no network device: nothing to expose');
  await ok('write_file', { sandbox_id: sbx, path: '/home/sandbox/ws.py', content: WS_ECHO_SERVER });
  await sh('exec python3 ~/ws.py', { background: true, timeout_seconds: 1200 });
  await ok('expose_port', { sandbox_id: sbx, port: 9000 });
  const host = `9000-${sbx}.${PREVIEW}`;
  let r = null;
  await waitFor('the WebSocket preview', async () => {
    r?.ws?.destroy();
    r = await wsConnect(tls.port, '/', {}, 20000,
      { tls: { ca: tls.caPem, servername: host }, host: `${host}:${tls.port}` }).catch(() => null);
    return r?.status === 101;
  }, 60000).catch(() => assert.fail(`upgrade: ${r?.head ?? 'no answer'}`));
  r.ws.send('echo over wss');
  await r.ws.waitFor(/echo over wss/);
  r.ws.destroy();
});

test('the terminal over wss through nginx', async () => {
  const r = await wsConnect(tls.port, `/v1/sandboxes/${sbx}/pty`, { 'x-api-key': acct.api_key }, 60000,
    { tls: { ca: tls.caPem, servername: API }, host: `${API}:${tls.port}` });
  assert.equal(r.status, 101, `upgrade: ${r.head}`);
  r.ws.send('echo term-$((20+22))\n');
  await r.ws.waitFor(/term-42/);
  r.ws.send('exit 0\n');
  const c = await Promise.race([r.ws.closed, sleep(20000).then(() => null)]);
  assert.equal(c?.code, 1000, `close: ${JSON.stringify(c)}`);
});

test('pause and resume keep the sandbox\'s files', async () => {
  const p = await ok('pause_sandbox', { sandbox_id: sbx });
  assert.equal(p.state, 'paused');
  const r = await ok('resume_sandbox', { sandbox_id: sbx });
  assert.equal(r.state, 'running');
  assert.equal((await sh('cat ~/tree/top.txt')).stdout, 'top\n');
});

test('an aasd restart (SIGTERM, started again the same way) keeps the sandbox working', async () => {
  const res = await srv.stop();
  assert.equal(res.code, 0, 'aasd stopped cleanly');
  srv = await startUnitAasd();
  assert.equal((await get(`${base}/healthz`)).status, 200, 'healthz after the restart');
  call = await toolCaller({ mcpUrl: `${base}/v1/mcp`, fetch: tls.fetch }, acct);
  const g = await ok('get_sandbox', { sandbox_id: sbx });
  assert.equal(g.state, 'running', JSON.stringify(g));
  assert.equal((await sh('cat ~/tree/a/b/note.txt')).stdout, 'hello prod\n');
  if (netOk) {
    const page = await waitFor('the preview after the restart', async () => {
      const p = await get(`https://8000-${sbx}.${PREVIEW}:${tls.port}/index.html`).catch(() => null);
      return p?.status === 200 && p;
    }, 30000);
    assert.equal(page.text, 'preview-ok\n');
  }
  await ledgerMatchesBalance();
});

test('a snapshot and a fork from it', async () => {
  const s = await ok('snapshot_sandbox', { sandbox_id: sbx, keep_minutes: 10 });
  assert.match(s.snapshot_id, /^snp-/, JSON.stringify(s));
  // The fork has the snapshot's network, whatever internet says.
  const f = await ok('create_sandbox', { from_snapshot: s.snapshot_id, timeout_minutes: 5 });
  assert.equal(f.network, netOk ? 'nat' : 'none', JSON.stringify(f));
  made.push({ id: f.sandbox_id });
  const r = await ok('run_command', { sandbox_id: f.sandbox_id, command: 'cat ~/tree/top.txt' });
  assert.equal(r.stdout, 'top\n', 'the fork has the file');
  const d = await ok('destroy_sandbox', { sandbox_id: f.sandbox_id });
  assert.equal(d.state, 'destroyed');
  made.splice(made.findIndex((m) => m.id === f.sandbox_id), 1);
  await ok('delete_snapshot', { snapshot_id: s.snapshot_id });
});

test('destroy, and the ledger matches the balance', async () => {
  const d = await ok('destroy_sandbox', { sandbox_id: sbx });
  assert.equal(d.state, 'destroyed');
  made.splice(made.findIndex((m) => m.id === sbx), 1);
  await ledgerMatchesBalance();
  // Nothing of it is left on the host (the teardown ends after the answer).
  await waitFor('its VM directory to go', () => !existsSync(path.join(SD, 'vms', sbx)), 30000)
    .catch(() => assert.fail(`${path.join(SD, 'vms', sbx)} is still there\n${srv.log().slice(-2000)}`));
});

test('a guest past its memory limit ends as out_of_memory', async () => {
  // 1 MiB over the guest's 512 (as jail.test.mjs): its QEMU reaches the
  // limit before the guest's own kernel runs out.
  await srv.stop();
  srv = await startUnitAasd({ AAS_VM_MEMORY_OVERHEAD_MIB: '1' });
  call = await toolCaller({ mcpUrl: `${base}/v1/mcp`, fetch: tls.fetch }, acct);
  const { sandbox_id: id } = await ok('create_sandbox', { size: 'small', timeout_minutes: 5, internet: false });
  made.push({ id });
  await call('run_command', { sandbox_id: id, timeout_seconds: 60,
    command: 'python3 -c "b = bytearray(b\'x\') * (400 << 20); import time; time.sleep(30)"' });
  let g;
  await waitFor('the sandbox to stop', async () => {
    g = await ok('get_sandbox', { sandbox_id: id });
    return g.state !== 'running';
  }, 60000).catch(() => {});
  assert.equal(g.state, 'failed', JSON.stringify(g));
  assert.equal(g.end_reason, 'out_of_memory', `${JSON.stringify(g)}\n${srv.log().slice(-2000)}`);
  made.splice(made.findIndex((m) => m.id === id), 1);
  await ledgerMatchesBalance();
});
