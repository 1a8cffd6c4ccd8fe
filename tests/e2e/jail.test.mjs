// Each VM's QEMU under a user of its own (AAS_QEMU_UIDS): from the host,
// one VM's user cannot read or write another VM's overlay, console or
// agent socket, nor write the guest image; users come back after destroy
// and are never held by two live VMs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { existsSync, readFileSync, readdirSync, statSync, writeFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import {
  startAasd, newAccount, vmEnv, toolCaller, STATE, IMAGE_DIR, sleep
} from './lib/harness.mjs';

const execFileP = promisify(execFile);
const LONG = { timeout: 600000 };
const FIRST = 3000000;
const COUNT = 1024; // AAS_QEMU_UIDS' default, 3000000-3001023
// Create-destroy cycles per chain, two chains at once. Five a chain shows
// every claim given back and none held twice as ten did, in half the
// time (each cycle boots a VM); make test-long runs ten.
const CYCLES = Number(process.env.AAS_JAIL_CYCLES || (process.env.AAS_TEST_LONG === '1' ? 10 : 5));

// A tool call that must succeed; resolves to its JSON result.
async function client(aasd, acct) {
  const call = await toolCaller(aasd, acct);
  return async (name, args) => {
    const r = await call(name, args);
    assert.ok(!r.isError, `${name}: ${r.text.slice(0, 400)}`);
    return r.json;
  };
}

// uid, gid and supplementary groups of every running QEMU of a sandbox
// under the test state directory, by sandbox id.
function qemus() {
  const out = new Map();
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    let cmd, status;
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      status = readFileSync(`/proc/${pid}/status`, 'utf8');
    } catch { continue; }
    const m = new RegExp(`${STATE}/vms/(sbx-[a-z0-9]{16})/disk.qcow2`).exec(cmd);
    if (!m || !cmd.startsWith('/usr/bin/qemu-system')) continue;
    const ids = (k) => status.match(new RegExp(`^${k}:\\s*(.*)$`, 'm'))[1].trim().split(/\s+/).map(Number);
    out.set(m[1], { pid: Number(pid), uid: ids('Uid')[0], gid: ids('Gid')[0], groups: ids('Groups').filter((g) => g) });
  }
  return out;
}

// Runs argv as uid:gid with no supplementary groups; resolves to
// { code, stderr }.
async function as(uid, gid, argv) {
  return execFileP('setpriv', [`--reuid=${uid}`, `--regid=${gid}`, '--clear-groups', '--', ...argv])
    .then((r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }), (e) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }));
}

const py = (code) => ['python3', '-c', code];
const vmDir = (id) => path.join(STATE, 'vms', id);
const agentSocket = (id) => `/run/aas-vm/aas-${id}.agent.aas`;

let aasd, toolA, toolB, idA, idB;

before(async () => {
  aasd = await startAasd(vmEnv('jail'));
  toolA = await client(aasd, await newAccount());
  toolB = await client(aasd, await newAccount());
  [idA, idB] = (await Promise.all([toolA('create_sandbox', { size: 'small' }),
    toolB('create_sandbox', { size: 'small' })])).map((c) => c.sandbox_id);
}, LONG);

after(async () => {
  for (const [t, id] of [[toolA, idA], [toolB, idB]])
    if (t && id) await t('destroy_sandbox', { sandbox_id: id }).catch(() => {});
  await aasd?.stop();
});

test('each VM runs under a user and group of its own, from the range', () => {
  const q = qemus();
  const a = q.get(idA), b = q.get(idB);
  assert.ok(a && b, `QEMUs of ${idA} and ${idB}: ${JSON.stringify([...q])}`);
  for (const x of [a, b]) {
    assert.ok(x.uid >= FIRST && x.uid < FIRST + COUNT, `uid ${x.uid}`);
    assert.equal(x.gid, x.uid); // TCG: a group of its own too
    assert.ok(x.groups.every((g) => g === x.gid), `groups ${x.groups}`); // no other group
  }
  assert.notEqual(a.uid, b.uid);
  // QEMU's own seccomp filter stays on.
  const argv = readFileSync(`/proc/${a.pid}/cmdline`, 'utf8').split('\0');
  const sandbox = argv[argv.indexOf('-sandbox') + 1] ?? '';
  assert.match(sandbox, /^on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny$/, argv.join(' '));
  assert.match(readFileSync(`/proc/${a.pid}/status`, 'utf8'), /^Seccomp:\s+2$/m);
  // Only the devices it needs: no USB, no display, no sound. The balloon
  // only takes back the pages the guest reports free.
  const wanted = new Set(['pcie-root-port', 'virtio-serial-pci', 'isa-serial', 'virtserialport',
    'virtio-blk-pci', 'virtio-rng-pci', 'virtio-net-pci', 'virtio-balloon-pci']);
  const devices = argv.flatMap((x, i) => (argv[i - 1] === '-device' ? [x] : []))
    .map((d) => (d.startsWith('{') ? JSON.parse(d).driver : d.split(',')[0]));
  assert.ok(devices.includes('virtio-blk-pci') && devices.includes('virtserialport'), devices.join(' '));
  assert.deepEqual(devices.filter((d) => !wanted.has(d)), [], devices.join(' '));
  assert.match(argv.find((x) => x.includes('virtio-balloon-pci')) ?? '', /"free-page-reporting":true|free-page-reporting=on/);
  assert.ok(!argv.includes('-vnc') && !argv.includes('-spice'), argv.join(' '));
  // libvirt names an audio backend, "none", for a machine with no sound device.
  for (const [i, x] of argv.entries())
    if (x === '-audiodev') assert.equal(JSON.parse(argv[i + 1]).driver, 'none', argv[i + 1]);
  // Its files: the overlay is its own, mode 0600; the directory is aasd's.
  const disk = statSync(path.join(vmDir(idA), 'disk.qcow2'));
  assert.equal(disk.uid, a.uid);
  assert.equal(disk.mode & 0o777, 0o600);
  const dir = statSync(vmDir(idA));
  assert.equal(dir.uid, process.getuid());
  assert.equal(dir.mode & 0o777, 0o711);
  // Its claim names it.
  assert.equal(readFileSync(path.join(STATE, 'uids', String(a.uid)), 'utf8').trim(), idA);
});

// A v1 controller's directory of pid's cgroup ("memory", "cpu", "blkio").
function cgroupDir(pid, controller) {
  const line = readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n')
    .find((l) => l.split(':')[1]?.split(',').includes(controller));
  assert.ok(line, `no v1 ${controller} cgroup for ${pid} (this test reads cgroup v1)`);
  return `/sys/fs/cgroup/${controller}${line.split(':')[2]}`;
}
const num = (file) => Number(readFileSync(file, 'utf8').trim());

test('resource bounds by size: CPU weight and quota, I/O weight, memory, processes', () => {
  const a = qemus().get(idA);
  // small: 1 vCPU, 512 MiB; the default overhead under TCG is the 64 MiB
  // translation cache plus 256 MiB.
  assert.equal(num(`${cgroupDir(a.pid, 'memory')}/memory.limit_in_bytes`), (512 + 64 + 256) * 1024 * 1024);
  // The domain's own group (QEMU's threads sit in groups below it).
  const cpu = cgroupDir(a.pid, 'cpu').replace(/\/emulator$/, '');
  assert.equal(num(`${cpu}/cpu.shares`), 1024);
  assert.equal(num(`${cpu}/cpu.cfs_period_us`), 100000);
  assert.equal(num(`${cpu}/cpu.cfs_quota_us`), 150000);
  const blkio = cgroupDir(a.pid, 'blkio');
  const weight = ['blkio.weight', 'blkio.bfq.weight'].map((f) => path.join(blkio, f)).find(existsSync);
  if (weight) assert.equal(num(weight), 250);
  assert.match(readFileSync(`/proc/${a.pid}/limits`, 'utf8'), /^Max processes\s+256\s+256\s+processes/m);
});

test('/healthz says how VMs are confined', async () => {
  const h = await (await fetch(`${aasd.url}/healthz`)).json();
  const c = h.vm.confinement;
  assert.equal(c.vm_users, 'own');
  assert.equal(c.vm_uids, `${FIRST}-${FIRST + COUNT - 1}`);
  assert.equal(c.seccomp, 'on');
  // libvirt's own report: ownership (dac) always; a MAC driver where the host has one.
  assert.match(c.security_drivers, /(^|,)dac($|,)/, JSON.stringify(c));
});

test("one VM's user reaches nothing of another VM's, nor writes the image", LONG, async () => {
  const a = qemus().get(idA);
  const base = path.join(IMAGE_DIR, 'base.qcow2');
  // Controls: the same user reads its own overlay and the image, so the
  // refusals below are about ownership, not a broken setpriv.
  const own = await as(a.uid, a.gid, ['head', '-c', '4', path.join(vmDir(idA), 'disk.qcow2')]);
  assert.equal(own.code, 0, own.stderr);
  assert.ok(own.stdout.startsWith('QFI'), 'not a qcow2 header');
  assert.equal((await as(a.uid, a.gid, ['head', '-c', '1', base])).code, 0);

  const denied = async (argv, what) => {
    const r = await as(a.uid, a.gid, argv);
    assert.notEqual(r.code, 0, `${what}: allowed`);
    assert.match(r.stderr, /Permission denied|PermissionError|Operation not permitted/, `${what}: ${r.stderr}`);
  };
  await denied(['head', '-c', '1', path.join(vmDir(idB), 'disk.qcow2')], "reading B's overlay");
  await denied(py(`open(${JSON.stringify(path.join(vmDir(idB), 'disk.qcow2'))}, 'r+b')`), "writing B's overlay");
  await denied(['head', '-c', '1', path.join(vmDir(idB), 'console.log')], "reading B's console");
  await denied(['touch', path.join(vmDir(idB), 'planted')], "creating in B's directory");
  await denied(['touch', path.join(vmDir(idA), 'console.log.new')], 'creating where aasd writes its console');
  await denied(py(`import socket; socket.socket(socket.AF_UNIX).connect(${JSON.stringify(agentSocket(idB))})`),
    "connecting to B's agent");
  await denied(py(`import socket; socket.socket(socket.AF_UNIX).connect(${JSON.stringify(agentSocket(idA))})`),
    'connecting to its own agent socket by path (QEMU holds it already)');
  await denied(py(`open(${JSON.stringify(base)}, 'r+b')`), 'writing the guest image');
  await denied(['touch', path.join(path.dirname(base), 'planted')], "creating in the image's directory");
  await denied(['ls', path.join(STATE, 'uids')], 'listing the claims');
});

test('users come back after destroy and two live VMs never share one', LONG, async () => {
  const claims = () => readdirSync(path.join(STATE, 'uids')).filter((f) => /^\d+$/.test(f));
  // The other chain gives users back meanwhile: a claim listed a moment
  // ago may be gone when it is read, and then it names no sandbox.
  const owner = (u) => {
    try {
      return readFileSync(path.join(STATE, 'uids', u), 'utf8').trim();
    } catch (e) {
      if (e.code === 'ENOENT') return '';
      throw e;
    }
  };
  const seen = new Set();
  const chain = async (tool) => {
    for (let i = 0; i < CYCLES; i++) {
      const { sandbox_id: id } = await tool('create_sandbox', { size: 'small' });
      const live = qemus();
      const mine = live.get(id);
      assert.ok(mine, `no QEMU for ${id}`);
      const same = [...live].filter(([, x]) => x.uid === mine.uid);
      assert.equal(same.length, 1, `uid ${mine.uid} held by ${same.map(([k]) => k)}`);
      seen.add(mine.uid);
      await tool('destroy_sandbox', { sandbox_id: id });
      // The answer comes before the teardown; its VM, directory and user
      // go right after, the user last.
      const left = () => [existsSync(vmDir(id)) && `${id}'s directory left`,
        claims().some((u) => owner(u) === id) && `${id}'s user not given back`,
        [...qemus().values()].some((x) => x.uid === mine.uid) && `a process of uid ${mine.uid} left`]
        .filter(Boolean);
      for (let t = 0; t < 300 && left().length; t++) await sleep(100);
      assert.deepEqual(left(), []);
    }
  };
  await Promise.all([chain(toolA), chain(toolB)]);
  // A given-back user is taken again last: as many users as VMs.
  assert.equal(seen.size, 2 * CYCLES, `${seen.size} users for ${2 * CYCLES} VMs`);
});

test('a claim whose VM and directory are gone is given back at start', LONG, async () => {
  const dir = path.join(STATE, 'uids');
  mkdirSync(dir, { recursive: true });
  // A uid near the range's end, which the tests' VMs do not reach.
  const uid = String(FIRST + COUNT - 1);
  writeFileSync(path.join(dir, uid), 'sbx-gone000000000000\n', { mode: 0o600 });
  const other = await startAasd(vmEnv('jail-sweep'));
  try {
    const t = await client(other, await newAccount());
    const { sandbox_id: id } = await t('create_sandbox', { size: 'small' }); // start-up is over
    assert.ok(!existsSync(path.join(dir, uid)), 'stale claim kept');
    await t('destroy_sandbox', { sandbox_id: id });
  } finally {
    await other.stop();
  }
});

test('a VM over its memory limit ends as out_of_memory; another VM and aasd keep running', LONG, async () => {
  // 1 MiB over the guest's 512: a guest touching most of its memory takes
  // its QEMU past the limit before its own kernel runs out.
  const tight = await startAasd(vmEnv('jail-oom', { AAS_VM_MEMORY_OVERHEAD_MIB: '1' }));
  try {
    const acct = await newAccount();
    const t = await client(tight, acct);
    const { sandbox_id: id } = await t('create_sandbox', { size: 'small' });
    const q = qemus().get(id);
    assert.equal(num(`${cgroupDir(q.pid, 'memory')}/memory.limit_in_bytes`), 513 * 1024 * 1024);
    const r = await (await toolCaller(tight, acct))('run_command', { sandbox_id: id,
      command: 'python3 -c "b = bytearray(b\'x\') * (400 << 20); import time; time.sleep(30)"', timeout_seconds: 60 });
    assert.ok(r.isError || r.json?.exit_code !== 0, `the hog finished: ${r.text.slice(0, 300)}`);
    let g;
    for (const end = Date.now() + 60000; Date.now() < end; await new Promise((res) => setTimeout(res, 500))) {
      g = await t('get_sandbox', { sandbox_id: id });
      if (g.state !== 'running') break;
    }
    assert.equal(g.state, 'failed', JSON.stringify(g));
    assert.equal(g.end_reason, 'out_of_memory', JSON.stringify(g));
    assert.match(g.failure_reason, /more memory on its host/);
    // The other aasd's VMs and this aasd are fine.
    assert.ok(qemus().get(idA), 'another VM went too');
    assert.equal((await toolA('run_command', { sandbox_id: idA, command: 'echo alive' })).stdout, 'alive\n');
    assert.equal((await fetch(`${tight.url}/healthz`)).status, 200);
  } finally {
    await tight.stop();
  }
});
