// pause_sandbox and resume_sandbox on real VMs: processes, files, the
// clock and preview URLs survive; paused minutes cost storage, not compute;
// expiry still ends a paused sandbox; a kill -9 in the middle of either
// leaves one consistent state, charged once, with no file left behind.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, statSync } from 'node:fs';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import {
  startAasd, newAccount, vmEnv, STATE, toolCaller, sleep, psql, qemuIds, waitFor, countsPast
} from './lib/harness.mjs';

const run = promisify(execFile);
const MINUTE_S = 3;
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

let aasd;
let a;
let b;
let acct;

before(async () => {
  aasd = await startAasd(vmEnv('pause', { AAS_BILLING_MINUTE_S: String(MINUTE_S) }));
  acct = await newAccount();
  a = await toolCaller(aasd, acct);
  b = await toolCaller(aasd, await newAccount());
});

after(async () => {
  await aasd?.stop();
});

test('pause and resume keep processes, files, the clock and the preview URL', LONG, async () => {
  const id = (await ok(a, 'create_sandbox', { size: 'small', timeout_minutes: 100 })).sandbox_id;
  const dir = `${STATE}/vms/${id}`;
  await sh(a, id, 'mkdir -p ~/www && echo kept-across-pause > ~/www/note.txt');
  await sh(a, id, 'sh -c \'echo $$ > ~/counter.pid; i=0; while :; do i=$((i+1)); echo $i > ~/count; sleep 0.1; done\'',
    { background: true });
  await sh(a, id, 'cd ~/www && exec python3 -m http.server 8000', { background: true });
  const ex = await ok(a, 'expose_port', { sandbox_id: id, port: 8000 });
  const host = new URL(ex.url).host;
  const preview = async () => {
    const { stdout } = await run('curl', ['-sS', '--max-time', '10', '-H', `Host: ${host}`,
      `${aasd.url}/note.txt`]).catch((e) => ({ stdout: String(e.stdout ?? '') }));
    return stdout;
  };
  await waitFor('the web server', async () => (await preview()).includes('kept-across-pause'), 60000);
  const pid = (await sh(a, id, 'cat ~/counter.pid')).trim();
  const before = Number((await sh(a, id, 'cat ~/count')).trim());
  assert.ok(before > 0);

  const p = await ok(a, 'pause_sandbox', { sandbox_id: id });
  assert.equal(p.state, 'paused');
  assert.ok(p.memory_bytes > 0 && p.refunded > 0, JSON.stringify(p));
  assert.ok(!(await qemuIds()).includes(id), 'a paused sandbox has no VM');
  assert.ok(existsSync(`${STATE}/saved/${id}.save`), 'its memory is on disk');
  // Where only aasd's user can write: libvirt trusts what a saved state says.
  assert.equal(statSync(`${STATE}/saved`).mode & 0o777, 0o700);
  assert.equal(statSync(`${STATE}/saved/${id}.save`).uid, process.getuid());
  assert.equal((await ok(a, 'get_sandbox', { sandbox_id: id })).state, 'paused');
  const busy = await a('run_command', { sandbox_id: id, command: 'true' });
  assert.ok(busy.isError && /paused/.test(busy.text), busy.text);
  const again = await a('pause_sandbox', { sandbox_id: id });
  assert.ok(again.isError && /paused, not running/.test(again.text), again.text);
  await sleep(2 * MINUTE_S * 1000);

  const r = await ok(a, 'resume_sandbox', { sandbox_id: id });
  assert.equal(r.state, 'running');
  assert.ok(r.charged > 0, JSON.stringify(r));
  assert.ok(!existsSync(`${STATE}/saved/${id}.save`), 'the saved memory goes once it runs');
  // The same process, still counting from where it was.
  assert.equal((await sh(a, id, `test -d /proc/${pid} && cat ~/counter.pid`)).trim(), pid);
  const after1 = Number((await sh(a, id, 'cat ~/count')).trim());
  assert.ok(after1 >= before, `${before} ${after1}`);
  assert.ok(await countsPast(async () => Number((await sh(a, id, 'cat ~/count')).trim()), after1, 1000),
    `${before} ${after1}: it counts on`);
  assert.equal((await sh(a, id, 'cat ~/www/note.txt')).trim(), 'kept-across-pause');
  // The clock was set at the resume.
  const guest = Number((await sh(a, id, 'date +%s')).trim());
  assert.ok(Math.abs(guest - Date.now() / 1000) < 5, `guest clock ${guest}`);
  await waitFor('the preview after the resume', async () => (await preview()).includes('kept-across-pause'), 30000);

  // Compute is billed for the running time only: the paused minutes are
  // storage, at the paused price.
  const d = await ok(a, 'destroy_sandbox', { sandbox_id: id });
  const ranS = Number(await psql(`select extract(epoch from (destroyed_at - ready_at)) - paused_ms / 1000.0
    from sandboxes where id = '${id}'`));
  const pausedS = Number(await psql(`select paused_ms / 1000.0 from sandboxes where id = '${id}'`));
  assert.ok(pausedS >= 2 * MINUTE_S, `paused ${pausedS} s`);
  assert.equal(d.minutes_used, Math.ceil(ranS / MINUTE_S), `ran ${ranS} s`);
  const price = Number(await psql(`select price_per_minute from sandboxes where id = '${id}'`));
  const storage = await count(`select -coalesce(sum(amount), 0) from ledger where sandbox_id = '${id}'
    and idempotency_key like 'charge:storage:%'`);
  assert.ok(storage > 0, 'the paused minutes cost storage');
  assert.equal(await count(`select -sum(amount) from ledger where sandbox_id = '${id}'`),
    d.minutes_used * price + storage, 'compute for the running minutes plus storage');
  assert.equal(d.charged - d.refunded, d.minutes_used * price + storage);
  await ledgerMatchesBalance(acct);
  await waitFor('its files to go', async () => !existsSync(dir), 60000);
});

test('a paused sandbox ends at its expiry like any other', LONG, async () => {
  const id = (await ok(a, 'create_sandbox', { size: 'small', timeout_minutes: 4 })).sandbox_id;
  await ok(a, 'pause_sandbox', { sandbox_id: id });
  await waitFor('its expiry', async () => (await psql(`select state from sandboxes where id = '${id}'`)) === 'destroyed',
    4 * MINUTE_S * 1000 + 30000);
  assert.equal(await psql(`select end_reason from sandboxes where id = '${id}'`), 'expired');
  assert.equal(await count(`select count(*) from ledger where sandbox_id = '${id}' and kind = 'refund'`), 1,
    'only the pause gave compute back');
  const r = await a('resume_sandbox', { sandbox_id: id });
  assert.ok(r.isError && /destroyed, not paused/.test(r.text), r.text);
  await ledgerMatchesBalance(acct);
  await waitFor('its files to go', async () => !existsSync(`${STATE}/vms/${id}`), 60000);
});

test('another account cannot pause or resume a sandbox', LONG, async () => {
  const id = (await ok(a, 'create_sandbox', { size: 'small', timeout_minutes: 10 })).sandbox_id;
  for (const tool of ['pause_sandbox', 'resume_sandbox']) {
    const r = await b(tool, { sandbox_id: id });
    assert.ok(r.isError && /not_found/.test(r.text), `${tool}: ${r.text}`);
  }
  assert.equal(await psql(`select state from sandboxes where id = '${id}'`), 'running');
  await ok(a, 'pause_sandbox', { sandbox_id: id });
  const r = await b('resume_sandbox', { sandbox_id: id });
  assert.ok(r.isError && /not_found/.test(r.text), r.text);
  const d = await b('destroy_sandbox', { sandbox_id: id });
  assert.ok(d.isError && /not_found/.test(d.text), d.text);
  await ok(a, 'destroy_sandbox', { sandbox_id: id });
});

test('kill -9 during a pause and during a resume: one state, charged once, no file left', LONG, async (t) => {
  const env = vmEnv('pausecrash', { AAS_RECONCILE_S: '1', AAS_BILLING_MINUTE_S: String(MINUTE_S) });
  let srv = await startAasd(env);
  const owner = await newAccount();
  let call = await toolCaller(srv, owner);
  const id = (await ok(call, 'create_sandbox', { size: 'small', timeout_minutes: 100 })).sandbox_id;
  const dir = `${STATE}/vms/${id}`;
  await sh(call, id, 'echo survives > ~/f');
  const restart = async () => {
    await srv.kill();
    srv = await startAasd(env);
    call = await toolCaller(srv, owner);
    // The killed aasd owned the move: reconcile finishes it once its
    // heartbeat is old.
    return waitFor('a settled state', async () => {
      const s = await psql(`select state from sandboxes where id = '${id}'`);
      return ['running', 'paused'].includes(s) && s;
    }, 60000).catch(async (e) => {
      throw new Error(`${e.message}: ${await psql(`select state from sandboxes where id = '${id}'`)}\n`
        + srv.log().slice(-3000));
    });
  };
  const consistent = async (state) => {
    const vm = (await qemuIds()).includes(id);
    assert.equal(vm, state === 'running', `${state} with${vm ? '' : 'out'} a VM`);
    assert.equal(existsSync(`${STATE}/saved/${id}.save`), state === 'paused');
    assert.ok(!existsSync(`${STATE}/saved/${id}.save.new`), 'no half-written save');
    if (state === 'running') assert.equal((await sh(call, id, 'cat ~/f')).trim(), 'survives');
    await ledgerMatchesBalance(owner);
    // Each move is charged once: a resume that did not finish gave its
    // compute back.
    const keys = async (k) => count(`select count(*) from ledger where sandbox_id = '${id}'
      and idempotency_key like '${k}%'`);
    assert.equal(await keys('refund:pause:'), await count(`select pauses from sandboxes where id = '${id}'`));
    assert.equal(await keys('charge:resume:'), await count(`select resumes from sandboxes where id = '${id}'`));
  };
  try {
    // Killed while QEMU writes the memory out (a save takes over a second here).
    const pausing = call('pause_sandbox', { sandbox_id: id }).catch(() => null);
    // (Or over already: the kill then finds it done, a crash all the same.)
    await waitFor('the pause to start', async () => ['pausing', 'paused'].includes(
      await psql(`select state from sandboxes where id = '${id}'`)), 30000);
    await sleep(200);
    let state = await restart();
    await pausing;
    t.diagnostic(`after the pause's kill: ${state}`);
    await consistent(state);
    if (state === 'running') await ok(call, 'pause_sandbox', { sandbox_id: id });
    // Killed while the memory is read back.
    const resuming = call('resume_sandbox', { sandbox_id: id }).catch(() => null);
    await waitFor('the resume to start', async () => ['resuming', 'running'].includes(
      await psql(`select state from sandboxes where id = '${id}'`)), 30000);
    await sleep(300);
    state = await restart();
    await resuming;
    t.diagnostic(`after the resume's kill: ${state}`);
    await consistent(state);
    if (state === 'paused') await ok(call, 'resume_sandbox', { sandbox_id: id });
    await consistent('running');
    await ok(call, 'destroy_sandbox', { sandbox_id: id });
    await ledgerMatchesBalance(owner);
    await waitFor('its files to go', async () => !existsSync(dir), 60000);
    await waitFor('its VM to go', async () => !(await qemuIds()).includes(id), 30000);
  } finally {
    await srv.stop();
  }
});
