// Booted snapshots, snapshot_sandbox and create_sandbox from_snapshot on
// real VMs: after the first cold boot, creates restore the image's booted
// state with an identity of their own, and fall back to a cold boot when
// that state is unusable; two forks
// of a sandbox that holds a file and runs a web server both serve it, keep
// their changes apart, and differ in random state and machine id; another
// account's snapshot is not found anywhere; a kill -9 in the middle of a
// snapshot leaves one consistent state, charged once, no file behind; a
// host without room beyond its sandboxes gets no booted-state VM.
import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, unlinkSync, writeFileSync } from 'node:fs';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import {
  aasctl, startAasd, newAccount, vmEnv, STATE, toolCaller, sleep, psql, qemuIds, waitFor, countsPast
} from './lib/harness.mjs';

const run = promisify(execFile);
const LONG = { timeout: 600000 };

async function ok(call, name, args) {
  const r = await call(name, args);
  assert.ok(!r.isError, `${name}: ${r.text.slice(0, 400)}`);
  return r.json;
}

async function sh(call, id, command, extra = {}) {
  const r = await ok(call, 'run_command', { sandbox_id: id, command, ...extra });
  return r.stdout ?? '';
}

async function ledgerMatchesBalance(acct) {
  assert.equal(await psql(`select coalesce(sum(amount), 0) from ledger where account_id = '${acct.account_id}'`),
    await psql(`select balance from accounts where id = '${acct.account_id}'`), 'ledger equals balance');
}

async function count(sql) { return Number(await psql(sql)); }

// Destroys what an account still has live (a failed test's cleanup).
async function destroyLeft(call, acct) {
  const ids = (await psql(`select id from sandboxes where account_id = '${acct.account_id}'
    and state not in ('destroyed', 'failed', 'expired')`)).split('\n').filter(Boolean);
  for (const id of ids) await call('destroy_sandbox', { sandbox_id: id }).catch(() => null);
}

const snapFiles = (snap) => readdirSync(`${STATE}/saved`).filter((f) => f.startsWith(snap));

let aasd;
let a;
let b;
let acct;
let other;

before(async () => {
  aasd = await startAasd(vmEnv('snapshot', { AAS_BOOT_SNAPSHOTS: '1' }));
  acct = await newAccount();
  other = await newAccount();
  a = await toolCaller(aasd, acct);
  b = await toolCaller(aasd, other);
});

// A test that fails leaves nothing to the next: its sandboxes (forks too)
// are destroyed and its snapshots deleted.
afterEach(async () => {
  for (const [call, who] of [[a, acct], [b, other]]) {
    if (!call) continue;
    await destroyLeft(call, who);
    const left = await call('list_snapshots', {}).catch(() => null);
    for (const s of left?.json?.snapshots ?? []) {
      await call('delete_snapshot', { snapshot_id: s.snapshot_id }).catch(() => null);
    }
  }
});

after(async () => {
  await aasd?.stop();
});

const bootSnaps = () => readdirSync(`${STATE}/saved`).filter((f) => f.startsWith('boot-'));

test('creates restore the booted image with fresh identities, and boot cold when it is unusable', LONG, async () => {
  for (const f of bootSnaps()) unlinkSync(`${STATE}/saved/${f}`);
  const first = await ok(a, 'create_sandbox', { size: 'small', timeout_minutes: 10 });
  assert.equal(first.boot, 'cold');
  // Made in the background from a VM of its own, not from this sandbox.
  await waitFor('the booted snapshot', async () => bootSnaps().filter((f) => !f.endsWith('.new')).length === 3, 120000);
  const save = bootSnaps().find((f) => f.endsWith('.save'));
  const made = [];
  for (let i = 0; i < 2; i++) {
    const r = await ok(a, 'create_sandbox', { size: 'small', timeout_minutes: 10 });
    assert.equal(r.boot, 'image_snapshot');
    assert.equal(r.from_snapshot, null);
    made.push(r.sandbox_id);
  }
  assert.equal((await ok(a, 'get_sandbox', { sandbox_id: made[0] })).boot, 'image_snapshot');
  const ident = async (id) => sh(a, id, 'cat /etc/machine-id; head -c 32 /dev/urandom | od -An -tx1 | tr -d " \\n"; echo; date +%s; cat ~/.marker 2>/dev/null || echo none');
  await sh(a, first.sandbox_id, 'echo mine > ~/.marker');
  const ids = await Promise.all([first.sandbox_id, ...made].map(ident));
  const lines = ids.map((x) => x.split('\n'));
  assert.equal(new Set(lines.map((l) => l[0])).size, 3, 'three machine ids');
  assert.equal(new Set(lines.map((l) => l[1])).size, 3, 'three random streams');
  for (const l of lines.slice(1)) {
    assert.ok(Math.abs(Number(l[2]) - Date.now() / 1000) < 10, `clock ${l[2]}`);
    assert.equal(l[3], 'none', 'nothing of another sandbox');
  }
  // A state this QEMU cannot load: a cold boot, and the state is made anew.
  writeFileSync(`${STATE}/saved/${save}`, 'LibvirtQemudSave but not really');
  const cold = await ok(a, 'create_sandbox', { size: 'small', timeout_minutes: 10 });
  assert.equal(cold.boot, 'cold');
  assert.equal((await sh(a, cold.sandbox_id, 'echo fine')).trim(), 'fine');
  for (const id of [first.sandbox_id, ...made, cold.sandbox_id]) await ok(a, 'destroy_sandbox', { sandbox_id: id });
  await ledgerMatchesBalance(acct);
});

test('two forks of a serving sandbox both serve its file, keep apart, and differ in identity', LONG, async () => {
  const src = (await ok(a, 'create_sandbox', { size: 'small', timeout_minutes: 30 })).sandbox_id;
  await sh(a, src, 'mkdir -p ~/www && echo from-the-source > ~/www/note.txt');
  await sh(a, src, 'cd ~/www && exec python3 -m http.server 8000', { background: true });
  await sh(a, src, 'sh -c \'i=0; while :; do i=$((i+1)); echo $i > ~/count; sleep 0.1; done\'',
    { background: true });
  const serves = async (id) => {
    const ex = await ok(a, 'expose_port', { sandbox_id: id, port: 8000 });
    const host = new URL(ex.url).host;
    return waitFor(`${id} to serve`, async () => {
      const { stdout } = await run('curl', ['-sS', '--max-time', '10', '-H', `Host: ${host}`,
        `${aasd.url}/note.txt`]).catch((e) => ({ stdout: String(e.stdout ?? '') }));
      return stdout.includes('from-the-source');
    }, 60000);
  };
  await serves(src);

  const balance0 = Number(await psql(`select balance from accounts where id = '${acct.account_id}'`));
  const snap = await ok(a, 'snapshot_sandbox', { sandbox_id: src, name: 'served', keep_minutes: 60 });
  assert.equal(snap.state, 'ready');
  assert.ok(snap.bytes > 0 && snap.charged > 0, JSON.stringify(snap));
  assert.equal(snap.balance, balance0 - snap.charged);
  assert.deepEqual(snapFiles(snap.snapshot_id).sort(),
    [`${snap.snapshot_id}.qcow2`, `${snap.snapshot_id}.save`, `${snap.snapshot_id}.xml`]);
  // The source runs on: its counter keeps counting.
  assert.equal((await ok(a, 'get_sandbox', { sandbox_id: src })).state, 'running');
  const c0 = Number(await sh(a, src, 'cat ~/count'));
  assert.ok(await countsPast(async () => Number(await sh(a, src, 'cat ~/count')), c0, 1500), 'the source counts on');

  const forks = [];
  for (let i = 0; i < 2; i++) {
    const f = await ok(a, 'create_sandbox', { from_snapshot: snap.snapshot_id, timeout_minutes: 30 });
    assert.equal(f.boot, 'snapshot');
    assert.equal(f.from_snapshot, snap.snapshot_id);
    assert.equal(f.size, 'small');
    forks.push(f.sandbox_id);
  }
  assert.notEqual((await ok(a, 'get_sandbox', { sandbox_id: src })).boot, 'snapshot');
  // Both forks serve the file from the web server that was running.
  for (const f of forks) await serves(f);
  // The counter came along and counts on in each.
  for (const f of forks) {
    const n = Number(await sh(a, f, 'cat ~/count'));
    assert.ok(await countsPast(async () => Number(await sh(a, f, 'cat ~/count')), n, 1500), `${f} counts on`);
  }
  // Changes stay apart.
  await sh(a, forks[0], 'echo only-in-the-first > ~/www/own.txt');
  assert.equal((await sh(a, forks[0], 'cat ~/www/own.txt')).trim(), 'only-in-the-first');
  for (const id of [src, forks[1]])
    assert.equal((await sh(a, id, 'test -e ~/www/own.txt && echo yes || echo no')).trim(), 'no');
  // An identity of their own: random state, machine id, clock.
  const ident = async (id) => sh(a, id, 'cat /etc/machine-id; head -c 32 /dev/urandom | od -An -tx1 | tr -d " \\n"; echo; date +%s');
  const [s0, f0, f1] = await Promise.all([src, ...forks].map(ident));
  const [m0, r0] = s0.split('\n');
  const [m1, r1, t1] = f0.split('\n');
  const [m2, r2, t2] = f1.split('\n');
  assert.match(m0, /^[0-9a-f]{32}$/);
  assert.equal(new Set([m0, m1, m2]).size, 3, 'three machine ids');
  assert.equal(new Set([r0, r1, r2]).size, 3, 'three random streams');
  for (const t of [t1, t2]) assert.ok(Math.abs(Number(t) - Date.now() / 1000) < 10, `clock ${t}`);

  // The snapshot outlives its source; a delete gives the minutes not begun
  // back and leaves the forks running.
  await ok(a, 'destroy_sandbox', { sandbox_id: src });
  const list = await ok(a, 'list_snapshots', {});
  assert.deepEqual(list.snapshots.map((s) => s.snapshot_id), [snap.snapshot_id]);
  const d = await ok(a, 'delete_snapshot', { snapshot_id: snap.snapshot_id });
  assert.ok(d.refunded > 0 && d.refunded < snap.charged, JSON.stringify(d));
  assert.deepEqual(snapFiles(snap.snapshot_id), []);
  for (const f of forks) assert.equal((await sh(a, f, 'cat ~/www/note.txt')).trim(), 'from-the-source');
  const again = await a('create_sandbox', { from_snapshot: snap.snapshot_id });
  assert.ok(again.isError && /not_found/.test(again.text), again.text);
  for (const f of forks) await ok(a, 'destroy_sandbox', { sandbox_id: f });
  await ledgerMatchesBalance(acct);
});

test("another account's snapshot is not found anywhere", LONG, async () => {
  const id = (await ok(a, 'create_sandbox', { size: 'small', timeout_minutes: 10 })).sandbox_id;
  const snap = (await ok(a, 'snapshot_sandbox', { sandbox_id: id })).snapshot_id;
  const notFound = (r, what) => assert.ok(r.isError && /not_found/.test(r.text), `${what}: ${r.text}`);
  notFound(await b('create_sandbox', { from_snapshot: snap }), 'create_sandbox');
  notFound(await b('delete_snapshot', { snapshot_id: snap }), 'delete_snapshot');
  notFound(await b('snapshot_sandbox', { sandbox_id: id }), 'snapshot_sandbox');
  assert.deepEqual((await ok(b, 'list_snapshots', {})).snapshots, []);
  for (const [method, path] of [['DELETE', `/v1/snapshots/${snap}`], ['POST', `/v1/sandboxes/${id}/snapshots`]]) {
    const r = await fetch(`${aasd.url}${path}`, { method, headers: { 'x-api-key': other.api_key } });
    assert.equal(r.status, 404, `${method} ${path}`);
  }
  const r = await fetch(`${aasd.url}/v1/sandboxes`, {
    method: 'POST',
    headers: { 'x-api-key': other.api_key, 'content-type': 'application/json' },
    body: JSON.stringify({ from_snapshot: snap }),
  });
  assert.equal(r.status, 404);
  assert.equal(await count(`select count(*) from sandboxes where account_id = '${other.account_id}'`), 0);
  assert.equal(await psql(`select state from snapshots where id = '${snap}'`), 'ready');
  // Its owner sees it over REST too, and deletes it there.
  const mine = await (await fetch(`${aasd.url}/v1/snapshots`, { headers: { 'x-api-key': acct.api_key } })).json();
  assert.deepEqual(mine.snapshots.map((s) => s.snapshot_id), [snap]);
  const del = await fetch(`${aasd.url}/v1/snapshots/${snap}`,
    { method: 'DELETE', headers: { 'x-api-key': acct.api_key } });
  assert.equal(del.status, 200);
  await ok(a, 'destroy_sandbox', { sandbox_id: id });
  await ledgerMatchesBalance(acct);
  await ledgerMatchesBalance(other);
});

test('kill -9 during a snapshot: one state, charged once, no file left', LONG, async (t) => {
  const env = vmEnv('snapcrash', { AAS_RECONCILE_S: '1' });
  let srv = await startAasd(env);
  const owner = await newAccount();
  let call = await toolCaller(srv, owner);
  const id = (await ok(call, 'create_sandbox', { size: 'small', timeout_minutes: 100 })).sandbox_id;
  const dir = `${STATE}/vms/${id}`;
  await sh(call, id, 'echo survives > ~/f');
  const snapshotKilledAfter = async (ms) => {
    // Killed while QEMU writes the memory out (early), or while the disk
    // is copied and the VM restored (later).
    const taking = call('snapshot_sandbox', { sandbox_id: id }).catch(() => null);
    await waitFor('the snapshot to start', async () =>
      (await psql(`select state from sandboxes where id = '${id}'`)) === 'snapshotting' ||
      await count(`select count(*) from snapshots where sandbox_id = '${id}' and state = 'saving'`) > 0, 30000);
    await sleep(ms);
    await srv.kill();
    srv = await startAasd(env);
    call = await toolCaller(srv, owner);
    await taking;
    await waitFor('a settled state', async () => {
      const s = await psql(`select state from sandboxes where id = '${id}'`);
      const n = await count(`select count(*) from snapshots where sandbox_id = '${id}' and state = 'saving'`);
      return s === 'running' && n === 0;
    }, 60000).catch(async (e) => {
      throw new Error(`${e.message}: ${await psql(`select state from sandboxes where id = '${id}'`)}\n`
        + srv.log().slice(-3000));
    });
    const [snap, state, reason] = (await psql(`select id || ' ' || state || ' ' || coalesce(end_reason, '-')
      from snapshots where sandbox_id = '${id}' order by created_at desc limit 1`)).split(' ');
    t.diagnostic(`killed ${ms} ms in: snapshot ${state} (${reason})`);
    assert.ok((await qemuIds()).includes(id), 'the sandbox runs');
    assert.equal((await sh(call, id, 'cat ~/f')).trim(), 'survives');
    const files = snapFiles(snap).sort();
    if (state === 'ready') {
      assert.deepEqual(files, [`${snap}.qcow2`, `${snap}.save`, `${snap}.xml`]);
      // Whole: a fork starts from it.
      const f = await ok(call, 'create_sandbox', { from_snapshot: snap });
      assert.equal((await sh(call, f.sandbox_id, 'cat ~/f')).trim(), 'survives');
      await ok(call, 'destroy_sandbox', { sandbox_id: f.sandbox_id });
      await ok(call, 'delete_snapshot', { snapshot_id: snap });
    } else {
      assert.equal(state, 'deleted');
      assert.equal(reason, 'failed');
      assert.deepEqual(files, []);
    }
    // Charged once, and given back at most once.
    assert.equal(await count(`select count(*) from ledger where idempotency_key = 'charge:snapshot:${snap}'`), 1);
    assert.ok(await count(`select count(*) from ledger where idempotency_key = 'refund:snapshot:${snap}'`) <= 1);
    assert.deepEqual(snapFiles(snap), []);
    await ledgerMatchesBalance(owner);
  };
  // AAS_SNAPCRASH_MS="100,600,..." tries more moments (a stress run).
  const moments = (process.env.AAS_SNAPCRASH_MS || '300,2500').split(',').map(Number);
  try {
    for (const ms of moments) {
      // A failure says when aasd was killed and what it logged after.
      await snapshotKilledAfter(ms).catch((err) => {
        throw new Error(`killed ${ms} ms into the snapshot: ${err.message}\naasd's log after the restart:\n`
          + srv.log().slice(-4000), { cause: err });
      });
    }
    await ok(call, 'destroy_sandbox', { sandbox_id: id });
    await ledgerMatchesBalance(owner);
    await waitFor('its files to go', async () => !existsSync(dir), 60000);
  } finally {
    // Also after a failure: no VM outlives the test.
    await destroyLeft(call, owner);
    await srv.stop();
  }
});

test('a host without room beyond its sandboxes makes no booted state', LONG, async () => {
  // No internet: settings whose booted state does not exist yet.
  const env = vmEnv('snaproom', { AAS_BOOT_SNAPSHOTS: '1' });
  const args = { size: 'small', internet: false, timeout_minutes: 5 };
  const uri = env.AAS_LIBVIRT_URI;
  const before = new Set(bootSnaps());
  const srv = await startAasd(env);
  try {
    const call = await toolCaller(srv, await newAccount());
    const host = (await aasctl('host', 'list')).find((h) => h.uri === uri);
    // Room for one small sandbox (512 MiB) and not two.
    await aasctl('host', 'add', uri, '--memory-overcommit', ((512 * 1.5) / host.capacity.memory_mib).toFixed(3));
    const full = await ok(call, 'create_sandbox', args);
    assert.equal(full.boot, 'cold');
    assert.match(srv.log(), /booted snapshot \S+ not made now: .* has no room beyond its sandboxes/);
    await ok(call, 'destroy_sandbox', { sandbox_id: full.sandbox_id });
    await aasctl('host', 'add', uri, '--memory-overcommit', '1');
    const roomy = await ok(call, 'create_sandbox', args);
    assert.equal(roomy.boot, 'cold');
    await waitFor('the booted state of these settings', async () =>
      bootSnaps().filter((f) => !before.has(f) && !f.endsWith('.new')).length === 3, 120000);
    assert.equal(srv.log().match(/not made now/g).length, 1, 'only the full host skipped it');
    await ok(call, 'destroy_sandbox', { sandbox_id: roomy.sandbox_id });
  } finally {
    await srv.stop();
    for (const f of bootSnaps()) if (!before.has(f)) unlinkSync(`${STATE}/saved/${f}`);
  }
});
