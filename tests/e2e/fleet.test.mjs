// A fleet of two hypervisor hosts: two libvirt daemons of their own on this
// machine (lib/hostd.mjs), reached over their sockets as remote hosts are.
// Placement by headroom and admission across them, from one aasd and from
// two at once; a host that dies: its sandboxes end as host_lost, billed up
// to the loss, creates go to the other host, and its leftover domains are
// destroyed when it comes back.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import {
  BUILD, TEST_NET_ALLOW, aasctl, newAccount, psql, sleep, startAasd, toolCaller, vmEnv,
} from './lib/harness.mjs';
import { startHostd } from './lib/hostd.mjs';

const run = promisify(execFile);
const SMALL_MIB = 512;
const DOWN_S = 6;

let A;
let B;

before(async () => {
  A = await startHostd('fleet-a');
  B = await startHostd('fleet-b');
  // Both share this machine's network, where aasd installs the isolation
  // rule itself; recorded as an operator would, so sandboxes with a
  // network device may go there.
  const env = { PATH: process.env.PATH, AAS_NET_ALLOW: TEST_NET_ALLOW };
  for (const h of [A, B]) {
    await aasctl('host', 'add', h.uri, '--isolation-rule', h.installRule(path.join(BUILD, 'aasd'), env));
  }
});

after(async () => {
  await A?.stop();
  await B?.stop();
  for (const h of [A, B]) if (h) await aasctl('host', 'remove', h.uri).catch(() => {});
});

function fleetEnv(extra = {}) {
  return vmEnv('fleet', { AAS_LIBVIRT_URI: `${A.uri},${B.uri}`, AAS_HOST_DOWN_S: String(DOWN_S), ...extra });
}

async function hostRow(uri) {
  return (await aasctl('host', 'list')).find((x) => x.uri === uri);
}

// Memory overcommit giving `uri` room for `mib` of reservations.
async function roomFor(uri, mib) {
  const h = await hostRow(uri);
  await aasctl('host', 'add', uri, '--memory-overcommit', ((mib + 1) / h.capacity.memory_mib).toFixed(6));
  const after = await hostRow(uri);
  const cap = after.capacity.memory_mib * after.memory_overcommit;
  assert.ok(cap >= mib && cap < mib + SMALL_MIB, `room ${cap} MiB for ${mib}`);
}

async function balance(acct) {
  return Number(await psql(`select balance from accounts where id = '${acct.account_id}'`));
}

async function hostOf(id) {
  return psql(`select host_uri from sandboxes where id = '${id}'`);
}

async function qemuAlive(id) {
  const { stdout } = await run('pgrep', ['-f', `qemu-system.*${id}`]).catch(() => ({ stdout: '' }));
  return stdout.trim() !== '';
}

async function until(what, fn, ms = 30000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

test('creates spread by headroom, the smaller host gets fewer, and a full fleet refuses at once', async () => {
  const srv = await startAasd(fleetEnv());
  const ids = [];
  const acct = await newAccount();
  const call = await toolCaller(srv, acct);
  try {
    await roomFor(A.uri, 3.5 * SMALL_MIB);
    await roomFor(B.uri, 1.5 * SMALL_MIB);
    for (let i = 0; i < 4; i++) {
      const r = await call('create_sandbox', { size: 'small', timeout_minutes: 5 });
      assert.equal(r.isError, false, r.text);
      ids.push(r.json.sandbox_id);
    }
    const where = await Promise.all(ids.map(hostOf));
    // Headroom after reservations: A, A, then B (A's room is below B's), then A.
    assert.deepEqual(where, [A.uri, A.uri, B.uri, A.uri]);
    const before = await balance(acct);
    const full = await call('create_sandbox', { size: 'small', timeout_minutes: 5 });
    assert.equal(full.isError, true);
    assert.match(full.text, /no capacity for size small/);
    assert.equal(await balance(acct), before, 'a refused create charges nothing');
    assert.deepEqual((await hostRow(A.uri)).reserved, { memory_mib: 3 * SMALL_MIB, vcpus: 3 });
    assert.deepEqual((await hostRow(B.uri)).reserved, { memory_mib: SMALL_MIB, vcpus: 1 });
    // Each runs on the daemon it was placed on.
    const r = await call('run_command', { sandbox_id: ids[2], command: 'echo on b' });
    assert.equal(r.json.stdout, 'on b\n');
  } finally {
    for (const id of ids) await call('destroy_sandbox', { sandbox_id: id });
    await srv.stop();
  }
});

test('two aasd creating at once never reserve past a host\'s limit', async () => {
  const one = await startAasd(fleetEnv());
  const two = await startAasd(fleetEnv());
  const acct = await newAccount();
  const calls = [await toolCaller(one, acct), await toolCaller(two, acct)];
  const made = [];
  try {
    await roomFor(A.uri, 2 * SMALL_MIB);
    await roomFor(B.uri, 1 * SMALL_MIB);
    const before = await balance(acct);
    const results = await Promise.all([0, 1, 0, 1, 0, 1].map((k) =>
      calls[k]('create_sandbox', { size: 'small', timeout_minutes: 5 }).then((r) => ({ k, r }))));
    for (const { k, r } of results) if (!r.isError) made.push({ k, id: r.json.sandbox_id });
    const refused = results.filter(({ r }) => r.isError);
    assert.equal(made.length, 3, JSON.stringify(results.map(({ r }) => r.text.slice(0, 120))));
    for (const { r } of refused) assert.match(r.text, /no capacity for size small/);
    assert.equal((await hostRow(A.uri)).reserved.memory_mib, 2 * SMALL_MIB);
    assert.equal((await hostRow(B.uri)).reserved.memory_mib, SMALL_MIB);
    const price = Number(await psql(`select price_per_minute from sandboxes where id = '${made[0].id}'`));
    assert.equal(before - await balance(acct), 3 * 5 * price, 'only the three were charged');
  } finally {
    for (const { k, id } of made) await calls[k]('destroy_sandbox', { sandbox_id: id });
    await one.stop();
    await two.stop();
  }
});

test('a host that dies: host_lost billed to the loss, creates go elsewhere, leftovers go when it returns', async () => {
  const srv = await startAasd(fleetEnv());
  const acct = await newAccount();
  const call = await toolCaller(srv, acct);
  let onB;
  try {
    await aasctl('host', 'add', A.uri, '--memory-overcommit', '1');
    await aasctl('host', 'add', B.uri, '--memory-overcommit', '1');
    await aasctl('host', 'drain', B.uri);
    const r = await call('create_sandbox', { size: 'small', timeout_minutes: 5 });
    assert.equal(r.isError, false, r.text);
    const lost = r.json.sandbox_id;
    assert.equal(await hostOf(lost), A.uri);
    await aasctl('host', 'undrain', B.uri);
    // The host answers a poll after the sandbox is ready: the loss is
    // billed up to that answer.
    await until('a poll of A after the sandbox is ready', async () => await psql(`select h.seen_at > s.ready_at
      from hosts h, sandboxes s where h.uri = '${A.uri}' and s.id = '${lost}'`) === 't', 30000);
    await A.kill();
    const killedAt = Date.now();
    await until('the sandbox to end', async () =>
      (await psql(`select state from sandboxes where id = '${lost}'`)) === 'destroyed', (DOWN_S + 20) * 1000);
    const row = (await psql(`select end_reason || '|' || minutes_used || '|' || paid_minutes || '|'
      || refunded || '|' || price_per_minute || '|'
      || (destroyed_at = (select seen_at from hosts where uri = host_uri))::text
      || '|' || extract(epoch from destroyed_at) * 1000 from sandboxes where id = '${lost}'`)).split('|');
    assert.equal(row[0], 'host_lost');
    assert.equal(row[5], 'true', 'billed up to the last time the host answered');
    assert.ok(Number(row[6]) <= killedAt, 'the loss is dated before it was noticed');
    assert.equal(Number(row[3]), (Number(row[2]) - Number(row[1])) * Number(row[4]), 'unused minutes refunded');
    assert.equal((await hostRow(A.uri)).state, 'down');
    assert.equal(await qemuAlive(lost), true, 'its QEMU outlived the daemon');

    const again = await call('create_sandbox', { size: 'small', timeout_minutes: 5 });
    assert.equal(again.isError, false, again.text);
    onB = again.json.sandbox_id;
    assert.equal(await hostOf(onB), B.uri);

    await A.start();
    await until('host A to be up again', async () => (await hostRow(A.uri)).state === 'up', 30000);
    await until('the leftover VM to be destroyed', async () => !(await qemuAlive(lost)), 30000);
    assert.equal((await hostRow(A.uri)).reserved.memory_mib, 0);
  } finally {
    if (onB) await call('destroy_sandbox', { sandbox_id: onB });
    await srv.stop();
  }
});
