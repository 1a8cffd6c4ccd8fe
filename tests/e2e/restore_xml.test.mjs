// A resume and a fork start the domain from the XML aasd keeps, never from
// the one inside the save file: a file rewritten to run QEMU as root and
// with a marker of its own restores as the VM's own user, without the
// marker. The saved memory, and every directory above it, is aasd's alone.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  closeSync, existsSync, openSync, readFileSync, readSync, readdirSync, statSync, writeSync
} from 'node:fs';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import path from 'node:path';
import {
  startAasd, newAccount, vmEnv, STATE, toolCaller, psql, qemuIds, waitFor
} from './lib/harness.mjs';

const execFileP = promisify(execFile);
const LONG = { timeout: 600000 };
const ROOT = 'restorexml';
const MARKER = 'planted-by-a-qemu';

async function ok(call, name, args) {
  const r = await call(name, args);
  assert.ok(!r.isError, `${name}: ${r.text.slice(0, 400)}`);
  return r.json;
}

// The uid of sandbox id's running QEMU (undefined when none runs).
function qemuUid(id) {
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    let cmd, status;
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      status = readFileSync(`/proc/${pid}/status`, 'utf8');
    } catch { continue; }
    if (!cmd.startsWith('/usr/bin/qemu-system') || !cmd.includes(`${STATE}/vms/${id}/disk.qcow2`)) continue;
    return Number(status.match(/^Uid:\s*(\d+)/m)[1]);
  }
  return undefined;
}

// The live domain XML libvirt keeps for sandbox id's domain.
const liveXml = (id) => readFileSync(`${STATE}/libvirt-${ROOT}/run/qemu/aas-${id}.xml`, 'utf8');

// Rewrites the domain XML inside libvirt's save image (a 92-byte header,
// then the XML, the cookie and padding) with edit(xml), as a QEMU that
// could write the file would.
function plant(file, edit) {
  const fd = openSync(file, 'r+');
  try {
    const head = Buffer.alloc(92);
    readSync(fd, head, 0, 92, 0);
    assert.equal(head.toString('latin1', 0, 16), 'LibvirtQemudSave');
    const dataLen = head.readUInt32LE(20);
    const cookieAt = head.readUInt32LE(32);
    const data = Buffer.alloc(dataLen);
    readSync(fd, data, 0, dataLen, 92);
    const xml = data.toString('utf8', 0, data.indexOf(0));
    const cookie = cookieAt ? data.subarray(cookieAt, data.indexOf(0, cookieAt) + 1) : Buffer.alloc(0);
    const planted = Buffer.from(`${edit(xml)}\0`);
    assert.ok(planted.length + cookie.length <= dataLen, 'the planted XML fits');
    const area = Buffer.alloc(dataLen);
    planted.copy(area, 0);
    cookie.copy(area, planted.length);
    head.writeUInt32LE(cookieAt ? planted.length : 0, 32);
    writeSync(fd, head, 0, 92, 0);
    writeSync(fd, area, 0, dataLen, 92);
  } finally {
    closeSync(fd);
  }
}

// Root as QEMU's user and a marker of its own.
function asRootWithMarker(xml) {
  assert.match(xml, /<label>\+\d+:\+\d+<\/label>/, 'the saved XML names the VM user');
  return xml.replace(/<label>\+\d+:\+\d+<\/label>/, '<label>+0:+0</label>')
    .replace('</name>', `</name>\n  <title>${MARKER}</title>`);
}

// The file and the path to it: aasd's, and nobody else's to write.
async function onlyAasdWrites(file, vmUid) {
  const st = statSync(file);
  assert.equal(st.uid, process.getuid(), `${file} is aasd's`);
  assert.equal(st.mode & 0o077, 0, `${file} mode ${(st.mode & 0o777).toString(8)}`);
  for (let d = path.dirname(file); ; d = path.dirname(d)) {
    const s = statSync(d);
    assert.ok(s.uid === 0 || s.uid === process.getuid(), `${d} owned by ${s.uid}`);
    // A world-writable directory above is only fine when sticky (/tmp).
    assert.ok((s.mode & 0o022) === 0 || (s.mode & 0o1000) !== 0, `${d} mode ${(s.mode & 0o7777).toString(8)}`);
    if (d === '/') break;
  }
  const r = await execFileP('setpriv', [`--reuid=${vmUid}`, `--regid=${vmUid}`, '--clear-groups', '--',
    'python3', '-c', `open(${JSON.stringify(file)}, 'r+b')`]).then(() => 0, (e) => e.code);
  assert.notEqual(r, 0, 'the VM user cannot open it for writing');
}

let aasd;
let a;
let acct;

before(async () => {
  aasd = await startAasd(vmEnv(ROOT));
  acct = await newAccount();
  a = await toolCaller(aasd, acct);
});

after(async () => {
  await aasd?.stop();
});

test('a save file rewritten to run as root restores as the VM user, without its marker', LONG, async () => {
  const id = (await ok(a, 'create_sandbox', { size: 'small', timeout_minutes: 30 })).sandbox_id;
  await ok(a, 'run_command', { sandbox_id: id, command: 'echo kept > ~/f' });
  const uid = qemuUid(id);
  assert.ok(uid > 0, `QEMU uid ${uid}`);

  await ok(a, 'pause_sandbox', { sandbox_id: id });
  const save = `${STATE}/saved/${id}.save`;
  await onlyAasdWrites(save, uid);
  plant(save, asRootWithMarker);

  await ok(a, 'resume_sandbox', { sandbox_id: id });
  assert.equal(qemuUid(id), uid, 'QEMU runs as the VM user, not as the planted one');
  const live = liveXml(id);
  assert.ok(!live.includes(MARKER), 'nothing of the planted XML');
  assert.ok(live.includes(`<label>+${uid}:+${uid}</label>`), 'aasd\'s label');
  assert.equal((await ok(a, 'run_command', { sandbox_id: id, command: 'cat ~/f' })).stdout.trim(), 'kept');
  // What it was restored from: aasd's too.
  await onlyAasdWrites(`${STATE}/saved/${id}.xml`, uid);

  // A fork from a snapshot whose save file was rewritten the same way.
  const snap = (await ok(a, 'snapshot_sandbox', { sandbox_id: id, name: 'planted', keep_minutes: 30 })).snapshot_id;
  await onlyAasdWrites(`${STATE}/saved/${snap}.save`, uid);
  await onlyAasdWrites(`${STATE}/saved/${snap}.xml`, uid);
  plant(`${STATE}/saved/${snap}.save`, asRootWithMarker);
  const f = (await ok(a, 'create_sandbox', { from_snapshot: snap, timeout_minutes: 30 })).sandbox_id;
  const fuid = qemuUid(f);
  assert.ok(fuid > 0 && fuid !== uid, `the fork's QEMU uid ${fuid}`);
  assert.ok(!liveXml(f).includes(MARKER), 'nothing of the planted XML in the fork');
  assert.equal((await ok(a, 'run_command', { sandbox_id: f, command: 'cat ~/f' })).stdout.trim(), 'kept');

  for (const s of [id, f]) await ok(a, 'destroy_sandbox', { sandbox_id: s });
  await ok(a, 'delete_snapshot', { snapshot_id: snap });
  assert.equal(await psql(`select coalesce(sum(amount), 0) from ledger where account_id = '${acct.account_id}'`),
    await psql(`select balance from accounts where id = '${acct.account_id}'`), 'ledger equals balance');
  await waitFor('their VMs to go', async () => !(await qemuIds()).some((x) => x === id || x === f), 60000);
  await waitFor('their kept XML to go', async () => [id, f, snap].every((s) => !existsSync(`${STATE}/saved/${s}.xml`)), 60000);
});
