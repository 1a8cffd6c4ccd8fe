// kill -9 of aasd in the middle of a create, then a restart: reconcile
// leaves no domain without a live row and no live row without a domain.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import {
  startAasd, newAccount, vmEnv, STATE, DB_URL, post, openSession, sleep, PROTOCOL,
} from './lib/harness.mjs';

const run = promisify(execFile);

async function psql(sql) {
  const { stdout } = await run('psql', [DB_URL, '-tAX', '-v', 'ON_ERROR_STOP=1', '-c', sql]);
  return stdout.trim();
}

async function qemuIds() {
  const { stdout } = await run('pgrep', ['-af', 'qemu-system']).catch(() => ({ stdout: '' }));
  return [...stdout.matchAll(new RegExp(`${STATE}/vms/(sbx-[a-z0-9]{16})/disk.qcow2`, 'g'))]
    .map((m) => m[1]);
}

async function waitFor(what, fn, ms) {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await sleep(250);
  }
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
  } finally {
    await aasd.stop();
  }
});
