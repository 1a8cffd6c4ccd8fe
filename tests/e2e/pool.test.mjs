// Hosts that share no files with aasd: two libvirt daemons of their own
// (lib/hostd.mjs) in whose mount namespaces aasd's VM directory and the
// image directory are empty. The image goes into each host's storage pool
// (uploaded once, checked by its hash), and each VM's overlay is a volume
// there, deleted with it. An evacuation between them pauses the guest,
// copies its overlay through the libvirt connections and moves its memory:
// processes and files go on on the other host.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import {
  BUILD, IMAGE_DIR, STATE, TEST_NET_ALLOW, aasctl, countsPast, newAccount, psql, sleep, startAasd, toolCaller,
  vmEnv,
} from './lib/harness.mjs';
import { startHostd } from './lib/hostd.mjs';

const run = promisify(execFile);

let C;
let D;

before(async () => {
  const hide = [path.join(STATE, 'vms'), realpathSync(IMAGE_DIR)];
  C = await startHostd('pool-c', { hide });
  D = await startHostd('pool-d', { hide });
});

after(async () => {
  await C?.stop();
  await D?.stop();
  for (const h of ['pool-c', 'pool-d']) await aasctl('host', 'remove', h).catch(() => {});
});

const volumes = (h) => (existsSync(h.pool) ? readdirSync(h.pool).sort() : []);

async function qemuCmdline(id) {
  const { stdout } = await run('pgrep', ['-af', `qemu-system.*${id}`]).catch(() => ({ stdout: '' }));
  return stdout;
}

test('a host without aasd\'s files gets the image in its pool and overlays as volumes; an evacuation copies the disk', async () => {
  const srv = await startAasd(vmEnv('pool', { AAS_LIBVIRT_URI: `${C.uri},${D.uri}` }));
  const acct = await newAccount();
  const call = await toolCaller(srv, acct);
  const ok = async (name, args) => {
    const r = await call(name, args);
    assert.equal(r.isError, false, `${name}: ${r.text}`);
    return r.json;
  };
  const rule = C.installRule(path.join(BUILD, 'aasd'), { PATH: process.env.PATH, AAS_NET_ALLOW: TEST_NET_ALLOW });
  const ids = [];
  try {
    for (const [h, name] of [[C, 'pool-c'], [D, 'pool-d']]) {
      const row = await aasctl('host', 'add', h.uri, '--name', name, '--storage', 'pool', '--isolation-rule', rule);
      assert.equal(row.storage, 'pool');
    }
    await aasctl('host', 'drain', 'pool-d');
    const id = (await ok('create_sandbox', { size: 'small', timeout_minutes: 30 })).sandbox_id;
    ids.push(id);
    assert.equal(await psql(`select host_uri from sandboxes where id = '${id}'`), C.uri);
    // The image's three files and this VM's overlay, in C's pool only.
    const onC = volumes(C);
    assert.equal(onC.filter((v) => /-(vmlinuz|initrd\.img|base\.qcow2)$/.test(v)).length, 3, onC.join(' '));
    assert.ok(onC.includes(`${id}.qcow2`), onC.join(' '));
    assert.deepEqual(volumes(D), []);
    const cmd = await qemuCmdline(id);
    assert.match(cmd, /\/var\/lib\/libvirt\/aas\/[0-9a-f]{16}-vmlinuz/);
    assert.doesNotMatch(cmd, new RegExp(realpathSync(IMAGE_DIR)), 'nothing of aasd\'s files is used');
    await ok('write_file', { sandbox_id: id, path: 'notes.txt', content: 'kept on the overlay\n' });
    await ok('run_command', { sandbox_id: id, background: true, timeout_seconds: 3600,
      command: 'i=0; while :; do i=$((i+1)); echo $i > ~/count; sleep 0.2; done' });
    const count = async () => Number((await ok('run_command', { sandbox_id: id, command: 'cat ~/count' })).stdout);
    const c0 = await count();

    // Evacuating C: D gets the image, the overlay is copied, the memory
    // follows; the guest paused for the copy and the move.
    await aasctl('host', 'undrain', 'pool-d');
    const ev = await aasctl('host', 'evacuate', 'pool-c', '--wait', '300');
    assert.deepEqual([ev.moved, ev.not_moved], [1, []], JSON.stringify(ev));
    assert.ok(ev.longest_pause_ms > 0, JSON.stringify(ev));
    assert.equal(await psql(`select host_uri || ' ' || state from sandboxes where id = '${id}'`), `${D.uri} running`);
    assert.ok(!volumes(C).includes(`${id}.qcow2`), 'the old overlay is gone');
    assert.ok(volumes(D).includes(`${id}.qcow2`));
    const c1 = await count();
    assert.ok(c1 > c0, `counter ${c0} -> ${c1}`);
    assert.ok(await countsPast(count, c1, 1000), 'it keeps counting on D');
    assert.equal((await ok('read_file', { sandbox_id: id, path: 'notes.txt' })).content, 'kept on the overlay\n');
    // Written after the move, on D's copy.
    await ok('write_file', { sandbox_id: id, path: 'after.txt', content: 'on d\n' });
    assert.equal((await ok('run_command', { sandbox_id: id, command: 'cat notes.txt after.txt' })).stdout,
      'kept on the overlay\non d\n');

    // A new VM on D (C is evacuated, so drained): the image is there
    // already and is not written again.
    const image = volumes(D).filter((v) => !v.startsWith('sbx-'));
    assert.equal(image.length, 3, image.join(' '));
    const stat = (v) => statSync(path.join(D.pool, v)).mtimeMs;
    const stamps = image.map(stat);
    const second = (await ok('create_sandbox', { size: 'small', timeout_minutes: 5 })).sandbox_id;
    ids.push(second);
    assert.equal(await psql(`select host_uri from sandboxes where id = '${second}'`), D.uri);
    assert.deepEqual(volumes(D).filter((v) => !v.startsWith('sbx-')), image);
    assert.deepEqual(image.map(stat), stamps, 'the image was not written again');

    // Destroyed: each overlay volume goes with its VM.
    for (const x of ids.splice(0)) await ok('destroy_sandbox', { sandbox_id: x });
    const overlays = () => [...volumes(C), ...volumes(D)].filter((v) => v.startsWith('sbx-'));
    for (let i = 0; i < 300 && overlays().length; i++) await sleep(100);
    assert.deepEqual(overlays(), []);
  } finally {
    for (const x of ids) await call('destroy_sandbox', { sandbox_id: x });
    await srv.stop();
  }
});
