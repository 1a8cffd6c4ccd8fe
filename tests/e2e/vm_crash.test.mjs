// kill -9 of aasd in the middle of a create, then a restart: reconcile
// leaves no domain without a live row and no live row without a domain.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import {
  startAasd, newAccount, vmEnv, STATE, DB_URL, post, openSession, sleep, PROTOCOL, psql, qemuIds,
  waitFor
} from './lib/harness.mjs';


// tools/call over one MCP session: (request id, tool, arguments) -> reply.
async function toolPoster(aasd, acct) {
  const sid = await openSession(aasd.mcpUrl, { 'x-api-key': acct.api_key });
  const H = { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL, 'x-api-key': acct.api_key };
  return (id, name, args) => post(aasd.mcpUrl, { jsonrpc: '2.0', id, method: 'tools/call',
    params: { name, arguments: args } }, H);
}

test('kill -9 during create, restart: rows and domains agree', async () => {
  const env = vmEnv('crash', { AAS_RECONCILE_S: '1' });
  const host = env.AAS_LIBVIRT_URI;
  let aasd = await startAasd(env);
  const acct = await newAccount();
  const sid = await openSession(aasd.mcpUrl, { 'x-api-key': acct.api_key });
  const pending = post(aasd.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'tools/call',
    params: { name: 'create_sandbox', arguments: { size: 'small' } } },
  { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL, 'x-api-key': acct.api_key })
    .catch(() => null);
  const id = await waitFor('a creating row', async () => psql(
    `select id from sandboxes where account_id = '${acct.account_id}' and state = 'creating'`), 60000);
  await waitFor('its QEMU process', async () => (await qemuIds()).includes(id), 60000);
  await aasd.kill();
  await pending;
  assert.ok((await qemuIds()).includes(id), 'the VM outlived aasd');

  aasd = await startAasd(env);
  try {
    await waitFor('the row to settle', async () => psql(
      `select state from sandboxes where id = '${id}' and state not in ('creating', 'destroying')`), 60000);
    await waitFor('the orphan VM to go', async () => !(await qemuIds()).includes(id), 30000);
    assert.equal(await psql(`select state from sandboxes where id = '${id}'`), 'failed');
    const live = (await psql(`select id from sandboxes where host_uri = '${host}'
      and state in ('creating', 'running', 'destroying')`)).split('\n').filter(Boolean);
    const mine = (await psql(`select id from sandboxes where host_uri = '${host}'`)).split('\n');
    const vms = (await qemuIds()).filter((v) => mine.includes(v));
    assert.deepEqual(vms.sort(), live.sort(), 'every live row has a VM and no VM lacks one');
    // The failed create was refunded in full, once.
    assert.equal(await psql(`select count(*) from ledger where sandbox_id = '${id}' and kind = 'refund'`), '1');
    assert.equal(await psql(`select sum(amount) from ledger where account_id = '${acct.account_id}'`),
      await psql(`select balance from accounts where id = '${acct.account_id}'`));
  } finally {
    await aasd.stop();
  }
});

test('kill -9 during destroy, extend and reaping: settled once, ledger equals balance, no orphan VM', async () => {
  const env = vmEnv('crash2', { AAS_RECONCILE_S: '1', AAS_BILLING_MINUTE_S: '3' });
  const host = env.AAS_LIBVIRT_URI;
  let aasd = await startAasd(env);
  const acct = await newAccount();
  const tool = await toolPoster(aasd, acct);
  const created = [];
  for (const [i, minutes] of [[1, 10], [2, 10], [3, 1]]) {
    const r = await tool(i, 'create_sandbox', { size: 'small', timeout_minutes: minutes });
    const m = r.text.match(/"sandbox_id":"(sbx-[a-z0-9]{16})"/);
    assert.ok(m, r.text.slice(0, 300));
    created.push(m[1]);
  }
  const [a, b, c] = created;
  // c expires while these are in flight; a is being destroyed, b extended.
  const inflight = [tool(10, 'destroy_sandbox', { sandbox_id: a }).catch(() => null),
    tool(11, 'extend_sandbox', { sandbox_id: b, minutes: 2 }).catch(() => null)];
  const cExp = Date.parse(await psql(`select to_char(expires_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') from sandboxes where id = '${c}'`));
  await sleep(Math.max(0, cExp - Date.now()) + 50);
  await aasd.kill();
  await Promise.all(inflight);

  aasd = await startAasd(env);
  try {
    const list = created.map((x) => `'${x}'`).join(',');
    await waitFor('every sandbox to settle', async () => (await psql(
      `select count(*) from sandboxes where id in (${list}) and (state in ('creating', 'destroying')
        or (state in ('destroyed', 'failed') and settled_at is null))`)) === '0'
      && (await psql(`select count(*) from sandboxes where id = '${c}' and state = 'destroyed'`)) === '1', 60000);
    for (const id of created) {
      const n = Number(await psql(`select count(*) from ledger where sandbox_id = '${id}' and kind = 'refund'`));
      assert.ok(n <= 1, `${id}: ${n} refunds`);
    }
    assert.equal(await psql(`select sum(amount) from ledger where account_id = '${acct.account_id}'`),
      await psql(`select balance from accounts where id = '${acct.account_id}'`));
    const live = (await psql(`select id from sandboxes where host_uri = '${host}'
      and state in ('creating', 'running', 'destroying')`)).split('\n').filter(Boolean);
    // A destroy answered before the kill may have left its VM to the
    // restarted aasd's reconcile.
    const want = live.filter((v) => created.includes(v)).sort();
    let vms = [];
    for (let i = 0; i < 120; i++) {
      vms = (await qemuIds()).filter((v) => created.includes(v)).sort();
      if (JSON.stringify(vms) === JSON.stringify(want)) break;
      await sleep(250);
    }
    assert.deepEqual(vms, want, 'no orphan VM, no VM-less live row');
  } finally {
    // Leave nothing running.
    await psql(`update sandboxes set expires_at = now() where id in (${created.map((x) => `'${x}'`).join(',')}) and state = 'running'`);
    await psql(`select pg_notify('aas_invalidate', 'e:')`);
    await waitFor('cleanup', async () => (await psql(`select count(*) from sandboxes where host_uri = '${host}' and state = 'running'`)) === '0', 30000).catch(() => null);
    await aasd.stop();
  }
});

test('kill -9 right after a destroy answered: the VM and its files go after the restart, settled once', async () => {
  const env = vmEnv('crash4', { AAS_RECONCILE_S: '1', AAS_SWEEP_GRACE_S: '2' });
  let aasd = await startAasd(env);
  const acct = await newAccount();
  const tool = await toolPoster(aasd, acct);
  const r = await tool(1, 'create_sandbox', { size: 'small' });
  const m = r.text.match(/"sandbox_id":"(sbx-[a-z0-9]{16})"/);
  assert.ok(m, r.text.slice(0, 300));
  const id = m[1];
  const dir = `${STATE}/vms/${id}`;
  assert.ok(existsSync(dir));
  const d = await tool(2, 'destroy_sandbox', { sandbox_id: id });
  assert.match(d.text, /\\?"state\\?":\\?"destroyed\\?"/);
  // The answer came with the VM out of reach and its teardown under way,
  // which the kill cuts short.
  await aasd.kill();
  assert.equal(await psql(`select state from sandboxes where id = '${id}'`), 'destroyed');

  aasd = await startAasd(env);
  try {
    await waitFor('its VM to go', async () => !(await qemuIds()).includes(id), 60000);
    await waitFor('its files to go', async () => !existsSync(dir), 90000);
    assert.equal(await psql(`select count(*) from ledger where sandbox_id = '${id}' and kind = 'refund'`), '1');
    assert.equal(await psql(`select sum(amount) from ledger where account_id = '${acct.account_id}'`),
      await psql(`select balance from accounts where id = '${acct.account_id}'`));
  } finally {
    await aasd.stop();
  }
});

test('SIGTERM while a command runs: aasd stops at once, the caller gets an error, the command is stopped', async () => {
  const env = vmEnv('crash3');
  let aasd = await startAasd(env);
  const acct = await newAccount();
  const H = { 'x-api-key': acct.api_key };
  let sbx;
  try {
    const created = await post(`${aasd.url}/v1/sandboxes`, { size: 'small', timeout_minutes: 10 }, H);
    assert.equal(created.status, 201, created.text);
    sbx = created.json.sandbox_id;
    const pending = post(`${aasd.url}/v1/sandboxes/${sbx}/commands`,
      { command: 'sleep 600', timeout_seconds: 900 }, H).catch((err) => ({ status: 0, text: String(err) }));
    await waitFor('the command to start', async () => psql(
      `select id from sandbox_commands where sandbox_id = '${sbx}' and guest_pid is not null`), 60000);
    const t0 = Date.now();
    await aasd.stop();
    const stopMs = Date.now() - t0;
    const r = await pending;
    assert.ok(stopMs < 15000, `aasd took ${stopMs} ms to stop`);
    assert.equal(r.status, 503, r.text);
    assert.match(r.text, /restarting/);
    assert.equal(await psql(`select state from sandbox_commands where sandbox_id = '${sbx}'`), 'failed');
  } finally {
    if (aasd.proc.exitCode === null) await aasd.kill();
    // The VM outlives aasd: a new one destroys it.
    aasd = await startAasd(env);
    try {
      if (sbx) await fetch(`${aasd.url}/v1/sandboxes/${sbx}`, { method: 'DELETE', headers: H });
    } finally {
      await aasd.stop();
    }
  }
});
