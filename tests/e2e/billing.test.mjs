// Credits, per-minute billing and expiry, end to end (real VMs, TCG).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startAasd, newAccount, vmEnv, STATE, DB_URL, sleep, BUILD, psql } from './lib/harness.mjs';

const run = promisify(execFile);
const PRICE_SMALL = 500;
let aasd;

async function connect(srv, key) {
  const t = new StreamableHTTPClientTransport(new URL(srv.mcpUrl), { requestInit: { headers: { 'x-api-key': key } } });
  const c = new Client({ name: 'aas-billing-e2e', version: '1' });
  await c.connect(t);
  return c;
}

const call = (c, name, args) => c.callTool({ name, arguments: args }, undefined, { timeout: 300000 });

async function ledgerMatches(account) {
  const sum = await psql(`select coalesce(sum(amount), 0) from ledger where account_id = '${account}'`);
  const bal = await psql(`select balance from accounts where id = '${account}'`);
  assert.equal(sum, bal, 'the ledger sums to the balance');
  return Number(bal);
}

function qemuRunning(id) {
  return run('pgrep', ['-f', `${STATE}/vms/${id}/disk.qcow2`]).then(() => true, () => false);
}

before(async () => { aasd = await startAasd(vmEnv('billing', { AAS_BILLING_MINUTE_S: '60' })); });
after(async () => { await aasd?.stop(); });

test('a new account starts with its free credit, as a ledger grant', async () => {
  const acct = await newAccount();
  const c = await connect(aasd, acct.api_key);
  const u = (await call(c, 'get_usage', {})).structuredContent;
  assert.equal(u.balance, 200000);
  assert.equal(u.free_credit_remaining, 200000);
  assert.equal(u.ledger.length, 1);
  assert.equal(u.ledger[0].kind, 'grant');
  await ledgerMatches(acct.account_id);
  await c.close();
});

test('create charges up front; extend charges and moves expiry; destroy refunds unused whole minutes', async () => {
  const acct = await newAccount();
  const c = await connect(aasd, acct.api_key);
  const s = (await call(c, 'create_sandbox', { size: 'small', timeout_minutes: 10 })).structuredContent;
  let u = (await call(c, 'get_usage', {})).structuredContent;
  assert.equal(u.balance, 200000 - 10 * PRICE_SMALL);
  assert.equal(u.ledger[0].kind, 'charge');
  assert.equal(u.ledger[0].amount, -10 * PRICE_SMALL);

  const x = await call(c, 'extend_sandbox', { sandbox_id: s.sandbox_id, minutes: 5 });
  assert.ok(!x.isError, x.content?.[0]?.text);
  assert.equal(x.structuredContent.charged, 5 * PRICE_SMALL);
  assert.equal(Date.parse(x.structuredContent.expires_at) - Date.parse(s.expires_at), 5 * 60000);
  assert.equal(x.structuredContent.balance, 200000 - 15 * PRICE_SMALL);

  const d = (await call(c, 'destroy_sandbox', { sandbox_id: s.sandbox_id })).structuredContent;
  assert.equal(d.state, 'destroyed');
  assert.equal(d.minutes_used, 1, 'seconds of use bill one started minute');
  assert.equal(d.charged, 15 * PRICE_SMALL);
  assert.equal(d.refunded, 14 * PRICE_SMALL);
  assert.equal(d.balance, 200000 - PRICE_SMALL);
  const again = (await call(c, 'destroy_sandbox', { sandbox_id: s.sandbox_id })).structuredContent;
  assert.equal(again.refunded, 14 * PRICE_SMALL, 'settled once');
  assert.equal(await ledgerMatches(acct.account_id), 200000 - PRICE_SMALL);

  u = (await call(c, 'get_usage', {})).structuredContent;
  assert.equal(u.spend_today, PRICE_SMALL);
  assert.deepEqual(u.ledger.map((l) => l.kind), ['refund', 'charge', 'charge', 'grant']);
  assert.equal(u.sandboxes[0].cost, PRICE_SMALL);
  await c.close();
});

test('bad billing input is refused and the ledger is unchanged', async () => {
  const acct = await newAccount();
  const other = await newAccount();
  const c = await connect(aasd, acct.api_key);
  const o = await connect(aasd, other.api_key);
  const s = (await call(c, 'create_sandbox', { size: 'small', timeout_minutes: 5 })).structuredContent;
  const count = () => psql(`select count(*) from ledger where account_id in ('${acct.account_id}', '${other.account_id}')`);
  const before = await count();
  for (const [client, args, re] of [
    [c, { sandbox_id: s.sandbox_id, minutes: 0 }, /minutes: must be at least 1/],
    [c, { sandbox_id: s.sandbox_id, minutes: -3 }, /minutes: must be at least 1/],
    [c, { sandbox_id: s.sandbox_id, minutes: 1440 }, /at most 1440 minutes/],
    [o, { sandbox_id: s.sandbox_id, minutes: 1 }, /not_found/],
  ]) {
    const r = await call(client, 'extend_sandbox', args);
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, re);
  }
  const big = await call(c, 'create_sandbox', { size: 'large', timeout_minutes: 1440 });
  assert.equal(big.isError, true);
  assert.match(big.content[0].text, /not enough credit: your balance is \d+ micro-USD; a large sandbox costs 8000 per minute/);
  assert.match(big.content[0].text, /buys \d+ minutes/);
  await call(c, 'destroy_sandbox', { sandbox_id: s.sandbox_id });
  const mid = await count();
  const r = await call(c, 'extend_sandbox', { sandbox_id: s.sandbox_id, minutes: 1 });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /destroyed; only a running sandbox can be extended/);
  assert.equal(await count(), mid);
  assert.equal(Number(mid), Number(before) + 1, 'only the refund was added');
  await ledgerMatches(acct.account_id);
  await c.close();
  await o.close();
});

test('20 parallel creates on a balance that pays for exactly 5: exactly 5 succeed', async () => {
  const srv = await startAasd(vmEnv('billing-par', { AAS_MAX_LIVE_SANDBOXES: '50' }));
  try {
    const { stdout } = await run(`${BUILD}/aasctl`, ['account', 'create', '--email',
      `par-${randomBytes(5).toString('hex')}@test.invalid`], {
      env: { PATH: process.env.PATH, AAS_STATE_DIR: STATE, AAS_DATABASE_URL: DB_URL,
        AAS_FREE_CREDIT: String(5 * PRICE_SMALL) } });
    const acct = JSON.parse(stdout);
    const c = await connect(srv, acct.api_key);
    const results = await Promise.all(Array.from({ length: 20 }, () =>
      call(c, 'create_sandbox', { size: 'small', timeout_minutes: 1 })));
    const ok = results.filter((r) => !r.isError);
    assert.equal(ok.length, 5);
    for (const r of results.filter((x) => x.isError)) assert.match(r.content[0].text, /not enough credit/);
    assert.equal(await ledgerMatches(acct.account_id), 0);
    for (const r of ok) await call(c, 'destroy_sandbox', { sandbox_id: r.structuredContent.sandbox_id });
    const bal = await ledgerMatches(acct.account_id);
    assert.ok(bal >= 0);
    await c.close();
  } finally {
    await srv.stop();
  }
});

test('a sandbox is destroyed within 5 s of expiry, also when aasd was down then', async () => {
  const env = vmEnv('billing-exp', { AAS_BILLING_MINUTE_S: '3' });
  let srv = await startAasd(env);
  const acct = await newAccount();
  let c = await connect(srv, acct.api_key);
  const a = (await call(c, 'create_sandbox', { size: 'small', timeout_minutes: 1 })).structuredContent;
  const b = (await call(c, 'create_sandbox', { size: 'small', timeout_minutes: 3 })).structuredContent;
  await c.close();
  // a expires while aasd runs.
  for (let i = 0; i < 100 && await psql(`select state from sandboxes where id = '${a.sandbox_id}'`) !== 'destroyed'; i++) await sleep(200);
  const lateA = Number(await psql(`select extract(epoch from destroyed_at - expires_at) from sandboxes where id = '${a.sandbox_id}'`));
  assert.ok(lateA >= 0 && lateA <= 5, `destroyed ${lateA}s after expiry`);
  assert.equal(await qemuRunning(a.sandbox_id), false);
  // b expires while aasd is down; the VM outlives aasd.
  await srv.stop();
  const wait = Date.parse(b.expires_at) - Date.now() + 2000;
  if (wait > 0) await sleep(wait);
  assert.equal(await psql(`select state from sandboxes where id = '${b.sandbox_id}'`), 'running');
  const back = Date.now();
  srv = await startAasd(env);
  try {
    for (let i = 0; i < 100 && await psql(`select state from sandboxes where id = '${b.sandbox_id}'`) !== 'destroyed'; i++) await sleep(200);
    assert.equal(await psql(`select state from sandboxes where id = '${b.sandbox_id}'`), 'destroyed');
    const lateB = Number(await psql(`select extract(epoch from destroyed_at) * 1000 from sandboxes where id = '${b.sandbox_id}'`)) - back;
    assert.ok(lateB <= 5000 + 3000, `destroyed ${lateB} ms after aasd came back`);
    assert.equal(await qemuRunning(b.sandbox_id), false);
    const used = await psql(`select minutes_used || '/' || paid_minutes || '/' || refunded from sandboxes where id = '${a.sandbox_id}'`);
    assert.equal(used, '1/1/0', 'an expired sandbox used what it paid for');
    await ledgerMatches(acct.account_id);
  } finally {
    await srv.stop();
  }
});

test('two aasd reaping the same host: each sandbox destroyed and refunded once', async () => {
  // Rows only: libvirt's test driver stands in for a shared hypervisor.
  const env = { AAS_LIBVIRT_URI: 'test:///default', AAS_VIRT: 'tcg', AAS_RECONCILE_S: '0' };
  const acct = await newAccount();
  const ids = Array.from({ length: 40 }, () => `sbx-${randomBytes(8).toString('hex').slice(0, 16)}`);
  const rows = ids.map((id) => `('${id}', '${acct.account_id}', 'small', 'test:///default', 'aas-${id}',
    'running', 10, now() - interval '30 seconds', now() + interval '3 seconds', 500, 10, 5000)`).join(',');
  const charges = ids.map((id) => `('${acct.account_id}', '${id}', 'charge', -5000, 10, 'test', 'charge:create:${id}')`).join(',');
  await psql(`begin;
    insert into sandboxes(id, account_id, size, host_uri, domain_name, state, timeout_minutes,
      ready_at, expires_at, price_per_minute, paid_minutes, charged) values ${rows};
    insert into ledger(account_id, sandbox_id, kind, amount, minutes, reason, idempotency_key) values ${charges};
    update accounts set balance = balance - ${5000 * ids.length} where id = '${acct.account_id}';
    commit;`);
  const a = await startAasd(env);
  const b = await startAasd(env);
  try {
    const list = ids.map((x) => `'${x}'`).join(',');
    for (let i = 0; i < 100; i++) {
      if (await psql(`select count(*) from sandboxes where id in (${list}) and settled_at is not null`) === String(ids.length)) break;
      await sleep(200);
    }
    assert.equal(await psql(`select count(*) from sandboxes where id in (${list}) and state = 'destroyed'`), String(ids.length));
    assert.equal(await psql(`select count(*) from ledger where kind = 'refund' and sandbox_id in (${list})`), String(ids.length));
    const late = Number(await psql(`select max(extract(epoch from destroyed_at - expires_at)) from sandboxes where id in (${list})`));
    assert.ok(late <= 5, `latest destroy ${late}s after expiry`);
    // 30 s in, 10 minutes paid: 1 minute used, 9 refunded, each once.
    assert.equal(await psql(`select count(*) from sandboxes where id in (${list}) and refunded = 4500 and minutes_used = 1`), String(ids.length));
    await ledgerMatches(acct.account_id);
  } finally {
    await a.stop();
    await b.stop();
  }
});
