// Sessions live in PostgreSQL: a second aasd on the same database serves a
// session the first one created; a database restart is survived.
// make test: alone (it restarts the PostgreSQL every lane uses).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startAasd, newAccount, post, openSession, initializeBody, devdb, sleep, PROTOCOL,
  DB_URL, psql, aasctl } from './lib/harness.mjs';

let a;
let b;
let bounded; // an aasd with small session limits

before(async () => {
  a = await startAasd();
  b = await startAasd();
  bounded = await startAasd({ AAS_MAX_ANON_SESSIONS: '10', AAS_MAX_SESSIONS_PER_ACCOUNT: '3' });
});
after(async () => {
  await a?.stop();
  await b?.stop();
  await bounded?.stop();
});

const rpc = (method, id = 1) => ({ jsonrpc: '2.0', id, method });

test('a session created through one aasd is served by another', async () => {
  const sid = await openSession(a.mcpUrl);
  const H = { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL };
  const r = await post(b.mcpUrl, rpc('tools/list'), H);
  assert.equal(r.status, 200);
  assert.equal(r.json.result.tools.length, 19);
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

test('a session id alone carries nothing: only the key that opened it uses it', async () => {
  const one = await newAccount();
  const two = await newAccount();
  const other = await aasctl('key', 'create', '--account', one.account_id, '--name', 'second');
  const sid = await openSession(a.mcpUrl, { 'x-api-key': one.api_key });
  const H = { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL };
  const SSE = { ...H, Accept: 'text/event-stream' };
  // Another account, another key of the same account, and no key at all:
  // 404 as for a session that does not exist, on every method.
  for (const who of [{ 'x-api-key': two.api_key }, { 'x-api-key': other.api_key }, {}]) {
    const r = await post(b.mcpUrl, rpc('ping'), { ...H, ...who });
    assert.equal(r.status, 404, `POST with ${Object.keys(who)}`);
    const g = await fetch(b.mcpUrl, { headers: { ...SSE, ...who } });
    assert.equal(g.status, 404, `GET with ${Object.keys(who)}`);
    await g.body?.cancel();
    const d = await fetch(b.mcpUrl, { method: 'DELETE', headers: { ...H, ...who } });
    assert.equal(d.status, 404, `DELETE with ${Object.keys(who)}`);
  }
  // The key that opened it keeps working, through either aasd.
  for (const u of [a.mcpUrl, b.mcpUrl]) {
    const r = await post(u, rpc('ping'), { ...H, 'x-api-key': one.api_key });
    assert.equal(r.status, 200);
  }
});

test('an anonymous session is bound to the first key that uses it', async () => {
  const one = await newAccount();
  const two = await newAccount();
  const sid = await openSession(a.mcpUrl);
  const H = { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL };
  assert.equal((await post(a.mcpUrl, rpc('ping'), H)).status, 200);
  assert.equal((await post(a.mcpUrl, rpc('ping'), { ...H, 'x-api-key': one.api_key })).status, 200);
  assert.equal(await psql(`SELECT account_id FROM mcp_sessions WHERE id = '${sid}'`), one.account_id);
  // From then on it is that key's: anonymous use and another key get 404,
  // through the aasd that bound it and through the other.
  for (const u of [a.mcpUrl, b.mcpUrl]) {
    assert.equal((await post(u, rpc('ping'), H)).status, 404);
    assert.equal((await post(u, rpc('ping'), { ...H, 'x-api-key': two.api_key })).status, 404);
    assert.equal((await post(u, rpc('ping'), { ...H, 'x-api-key': one.api_key })).status, 200);
  }
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

test('a loop of anonymous initializes keeps at most AAS_MAX_ANON_SESSIONS rows, newest first', async () => {
  const sids = [];
  for (let i = 0; i < 40; i++) sids.push(await openSession(bounded.mcpUrl));
  const rows = Number(await psql('SELECT count(*) FROM mcp_sessions WHERE account_id IS NULL'));
  assert.ok(rows <= 10, `${rows} anonymous sessions kept`);
  // Asked through another aasd, whose cache has never seen them: the
  // oldest is gone, the newest is served.
  const ping = (sid) => post(b.mcpUrl, rpc('ping'), { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL });
  assert.equal((await ping(sids[0])).status, 404);
  assert.equal((await ping(sids[39])).status, 200);
});

test('an anonymous session idle longer than AAS_ANON_SESSION_IDLE_S ends; a keyed one does not', async () => {
  const acct = await newAccount();
  const anon = await openSession(a.mcpUrl);
  const keyed = await openSession(a.mcpUrl, { 'x-api-key': acct.api_key });
  await psql(`UPDATE mcp_sessions SET last_seen_at = now() - interval '10 minutes' WHERE id IN ('${anon}', '${keyed}')`);
  const H = (sid) => ({ 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL });
  assert.equal((await post(b.mcpUrl, rpc('ping'), H(anon))).status, 404);
  assert.equal((await post(b.mcpUrl, rpc('ping'), { ...H(keyed), 'x-api-key': acct.api_key })).status, 200);
});

test('an account beyond AAS_MAX_SESSIONS_PER_ACCOUNT is refused with a clear error, until one ends', async () => {
  const acct = await newAccount();
  const K = { 'x-api-key': acct.api_key };
  const sids = [];
  for (let i = 0; i < 3; i++) sids.push(await openSession(bounded.mcpUrl, K));
  const r = await post(bounded.mcpUrl, initializeBody(), K);
  assert.equal(r.json?.error?.code, -32000, r.text); // a limit, not an internal error
  assert.match(r.json.error.message, /AAS_MAX_SESSIONS_PER_ACCOUNT=3/);
  assert.equal(r.headers.get('mcp-session-id'), null);
  assert.equal(Number(await psql(`SELECT count(*) FROM mcp_sessions WHERE account_id = '${acct.account_id}'`)), 3);
  // Another account is not affected.
  const other = await newAccount();
  await openSession(bounded.mcpUrl, { 'x-api-key': other.api_key });
  // Ending one makes room.
  const d = await fetch(bounded.mcpUrl, { method: 'DELETE',
    headers: { 'Mcp-Session-Id': sids[0], 'MCP-Protocol-Version': PROTOCOL, ...K } });
  assert.equal(d.status, 200);
  await openSession(bounded.mcpUrl, K);
});
