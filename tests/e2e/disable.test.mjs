// aasctl account disable against a live account: a key cached by aasd, an
// MCP session with an open GET stream and a running sandbox. Within about
// a second the key gets 401 on MCP and REST, the session is gone, the
// stream is closed, the VM is stopped and its bill settled (end reason
// account_disabled). Enabling lets the account in with a new key only.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  startAasd, newAccount, aasctl, vmEnv, STATE, DB_URL, post, openSession, sleep, PROTOCOL, psql, qemuIds
} from './lib/harness.mjs';

const DEADLINE_MS = 3000; // what each effect is given; the measured times are logged

// Milliseconds from t0 until fn() is true, polling tightly; fails after
// DEADLINE_MS.
async function within(what, t0, fn) {
  for (;;) {
    if (await fn()) return Date.now() - t0;
    if (Date.now() - t0 > DEADLINE_MS) throw new Error(`${what}: not within ${DEADLINE_MS} ms`);
    await sleep(20);
  }
}

const rpc = (method, params, id = 1) => ({ jsonrpc: '2.0', id, method, params });

test('account disable: keys, sessions, streams and sandboxes end within a second, settled', async () => {
  const aasd = await startAasd(vmEnv('disable'));
  try {
    const acct = await newAccount();
    const K = { 'x-api-key': acct.api_key };
    const rest = (method, p, headers = K, body) => fetch(`${aasd.url}${p}`, {
      method, headers: { 'Content-Type': 'application/json', ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

    // A running sandbox, paid for 10 minutes.
    let r = await rest('POST', '/v1/sandboxes', K, { timeout_minutes: 10 });
    assert.equal(r.status, 201, await r.clone().text());
    const id = (await r.json()).sandbox_id;
    assert.ok((await qemuIds()).includes(id), 'its VM runs');

    // A session with an open GET stream; the key is in aasd's cache.
    const sid = await openSession(aasd.mcpUrl, K);
    const S = { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL, ...K };
    assert.equal((await post(aasd.mcpUrl, rpc('tools/list'), S)).status, 200);
    assert.equal((await rest('GET', '/v1/sandboxes')).status, 200);
    const g = await fetch(aasd.mcpUrl, { headers: { Accept: 'text/event-stream', ...S } });
    assert.equal(g.status, 200);
    let streamClosedAt = 0;
    const reader = g.body.getReader();
    const drained = (async () => {
      for (;;) {
        const { done } = await reader.read().catch(() => ({ done: true }));
        if (done) { streamClosedAt = Date.now(); return; }
      }
    })();

    const t0 = Date.now();
    const d = await aasctl('account', 'disable', '--account', acct.account_id);
    assert.equal(d.disabled, true);
    assert.equal(d.keys_revoked, 1);
    assert.equal(d.sessions_ended, 1);
    assert.equal(d.sandboxes_stopping, 1);
    const command = Date.now() - t0;

    const times = await Promise.all([
      within('MCP 401', t0, async () =>
        (await post(aasd.mcpUrl, rpc('initialize', { protocolVersion: PROTOCOL, capabilities: {},
          clientInfo: { name: 'e2e', version: '1' } }), K)).status === 401),
      within('REST 401', t0, async () => (await rest('GET', '/v1/usage')).status === 401),
      within('session gone', t0, async () =>
        [401, 404].includes((await post(aasd.mcpUrl, rpc('tools/list'), S)).status)),
      within('GET stream closed', t0, async () => streamClosedAt !== 0),
      within('sandbox destroyed, VM gone', t0, async () =>
        (await psql(`select state from sandboxes where id = '${id}'`)) === 'destroyed'
        && !(await qemuIds()).includes(id)),
    ]);
    await drained;
    const [mcp401, rest401, session, stream, vm] = times;
    console.log(`account disable (aasctl itself ${command} ms): MCP 401 after ${mcp401} ms,`
      + ` REST 401 after ${rest401} ms, session gone after ${session} ms,`
      + ` GET stream closed after ${stream} ms, VM gone and settled after ${vm} ms`);
    assert.equal(streamClosedAt - t0 <= DEADLINE_MS, true);

    // Settled: the started minute charged, the other nine refunded.
    const row = (await psql(`select end_reason, minutes_used, refunded, charged, settled_at is not null
      from sandboxes where id = '${id}'`)).split('|');
    assert.equal(row[0], 'account_disabled');
    const [used, refunded, charged] = row.slice(1, 4).map(Number);
    assert.equal(row[4], 't');
    assert.ok(used >= 1 && used < 10, `minutes used: ${used}`);
    assert.equal(refunded, charged / 10 * (10 - used));
    assert.equal(await psql(`select sum(amount) from ledger where account_id = '${acct.account_id}'`),
      await psql(`select balance from accounts where id = '${acct.account_id}'`));
    assert.ok(aasd.log().includes(`sandbox ${id}: account_disabled`), 'the reaper says why');

    // Enabled again: the old key stays revoked, a new one works and sees
    // why the sandbox ended.
    await aasctl('account', 'enable', '--account', acct.account_id);
    assert.equal((await rest('GET', '/v1/usage')).status, 401);
    const k2 = await aasctl('key', 'create', '--account', acct.account_id);
    r = await rest('GET', `/v1/sandboxes/${id}`, { 'x-api-key': k2.api_key });
    assert.equal(r.status, 200);
    const sb = await r.json();
    assert.equal(sb.state, 'destroyed');
    assert.equal(sb.end_reason, 'account_disabled');
  } finally {
    await aasd.stop();
  }
});

test('a disabled account\'s sandbox is stopped by the next aasd to start', async () => {
  const env = vmEnv('disable2');
  let aasd = await startAasd(env);
  const acct = await newAccount();
  let id;
  try {
    const r = await fetch(`${aasd.url}/v1/sandboxes`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', 'x-api-key': acct.api_key },
      body: JSON.stringify({ timeout_minutes: 5 }),
    });
    assert.equal(r.status, 201);
    id = (await r.json()).sandbox_id;
  } finally {
    await aasd.kill();
  }
  // No aasd listens while the account is disabled.
  await aasctl('account', 'disable', '--account', acct.account_id);
  assert.equal(await psql(`select state from sandboxes where id = '${id}'`), 'running');
  aasd = await startAasd(env);
  try {
    const t0 = Date.now();
    for (;;) {
      if ((await psql(`select state from sandboxes where id = '${id}'`)) === 'destroyed') break;
      assert.ok(Date.now() - t0 < 30000, 'stopped after the restart');
      await sleep(100);
    }
    assert.equal(await psql(`select end_reason from sandboxes where id = '${id}'`), 'account_disabled');
    assert.equal(await psql(`select sum(amount) from ledger where account_id = '${acct.account_id}'`),
      await psql(`select balance from accounts where id = '${acct.account_id}'`));
  } finally {
    await aasd.stop();
  }
});
