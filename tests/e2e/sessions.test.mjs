// Sessions live in PostgreSQL: a second aasd on the same database serves a
// session the first one created; a database restart is survived.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startAasd, newAccount, post, openSession, devdb, sleep, PROTOCOL } from './lib/harness.mjs';

let a;
let b;

before(async () => {
  a = await startAasd();
  b = await startAasd();
});
after(async () => {
  await a?.stop();
  await b?.stop();
});

const rpc = (method, id = 1) => ({ jsonrpc: '2.0', id, method });

test('a session created through one aasd is served by another', async () => {
  const sid = await openSession(a.mcpUrl);
  const H = { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL };
  const r = await post(b.mcpUrl, rpc('tools/list'), H);
  assert.equal(r.status, 200);
  assert.equal(r.json.result.tools.length, 12);
  const d = await fetch(b.mcpUrl, { method: 'DELETE', headers: H });
  assert.equal(d.status, 200);
  // The other aasd learns of the end through a database notification.
  const t0 = Date.now();
  let gone;
  do {
    gone = await post(a.mcpUrl, rpc('ping'), H);
  } while (gone.status === 200 && Date.now() - t0 < 1000);
  assert.equal(gone.status, 404);
});

test("a session opened with one account's key is not another account's", async () => {
  const one = await newAccount();
  const two = await newAccount();
  const sid = await openSession(a.mcpUrl, { 'x-api-key': one.api_key });
  let r = await post(b.mcpUrl, rpc('ping'), { 'Mcp-Session-Id': sid, 'x-api-key': one.api_key });
  assert.equal(r.status, 200);
  r = await post(b.mcpUrl, rpc('ping'), { 'Mcp-Session-Id': sid, 'x-api-key': two.api_key });
  assert.equal(r.status, 404);
});

test('PostgreSQL restarted while aasd runs: clean failures, then service again', async () => {
  const sid = await openSession(a.mcpUrl);
  const H = { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL };
  await devdb('stop');
  try {
    const r = await post(a.mcpUrl, rpc('tools/list'), H);
    assert.equal(r.status, 503);
    assert.equal(r.json.jsonrpc, '2.0');
    assert.equal(r.json.error.code, -32000);
    const h = await fetch(`${a.url}/healthz`);
    assert.equal(h.status, 503);
    const init = await post(a.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'initialize',
      params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: 'x', version: '1' } } });
    assert.equal(init.status, 200);
    assert.equal(init.json.error.code, -32000, 'initialize fails as a JSON-RPC error');
  } finally {
    await devdb('start');
  }
  // Every pooled connection was broken by the restart; each is reset on use.
  for (let i = 0; i < 20; i++) {
    const r = await post(a.mcpUrl, rpc('tools/list', i), H);
    assert.equal(r.status, 200, `request ${i} after restart`);
  }
  assert.equal((await fetch(`${a.url}/healthz`)).status, 200);
  assert.ok(a.proc.exitCode === null, 'aasd is still running');
  await sleep(10);
});
