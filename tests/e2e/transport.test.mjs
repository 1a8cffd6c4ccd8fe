// Streamable HTTP transport rules, checked at the HTTP level.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  startAasd, newAccount, aasctl, post, openSession, initializeBody, sseMessages,
  JSON_HEADERS, PROTOCOL, sleep,
} from './lib/harness.mjs';

let aasd;
let account;
let sid;
let ksid; // a session of account's key: a session is used only with the credential that opened it

before(async () => {
  aasd = await startAasd({ AAS_MAX_BODY_BYTES: '65536' });
  account = await newAccount();
  sid = await openSession(aasd.mcpUrl);
  ksid = await openSession(aasd.mcpUrl, { 'x-api-key': account.api_key });
});
after(async () => { await aasd?.stop(); });

const S = () => ({ 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL });
const K = () => ({ 'Mcp-Session-Id': ksid, 'MCP-Protocol-Version': PROTOCOL, 'x-api-key': account.api_key });
const rpc = (method, params, id = 7) => ({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) });

test('initialize negotiates each supported version and falls back to the newest', async () => {
  for (const v of ['2025-03-26', '2025-06-18', '2025-11-25']) {
    const r = await post(aasd.mcpUrl, initializeBody(1, v));
    assert.equal(r.status, 200);
    assert.equal(r.json.result.protocolVersion, v);
    assert.match(r.headers.get('mcp-session-id'), /^[0-9a-f]{64}$/);
  }
  const r = await post(aasd.mcpUrl, initializeBody(1, '2024-01-01'));
  assert.equal(r.json.result.protocolVersion, '2025-11-25');
  assert.deepEqual(r.json.result.capabilities, { tools: { listChanged: false } });
  assert.equal(r.json.result.serverInfo.name, 'aas');
});

test('notifications get 202 with an empty body', async () => {
  const r = await post(aasd.mcpUrl, { jsonrpc: '2.0', method: 'notifications/initialized' }, S());
  assert.equal(r.status, 202);
  assert.equal(r.text, '');
});

test('ping answers {}', async () => {
  const r = await post(aasd.mcpUrl, rpc('ping'), S());
  assert.equal(r.status, 200);
  assert.deepEqual(r.json, { jsonrpc: '2.0', id: 7, result: {} });
});

test('400 when the session header is missing after initialize', async () => {
  const r = await post(aasd.mcpUrl, rpc('tools/list'));
  assert.equal(r.status, 400);
  assert.equal(r.json.error.code, -32000);
  assert.match(r.json.error.message, /Mcp-Session-Id/);
});

test('404 for an unknown session, and after DELETE ends one', async () => {
  let r = await post(aasd.mcpUrl, rpc('tools/list'), { 'Mcp-Session-Id': 'f'.repeat(64) });
  assert.equal(r.status, 404);
  r = await post(aasd.mcpUrl, rpc('tools/list'), { 'Mcp-Session-Id': 'not-a-session' });
  assert.equal(r.status, 404);
  const mine = await openSession(aasd.mcpUrl);
  const d = await fetch(aasd.mcpUrl, { method: 'DELETE', headers: { 'Mcp-Session-Id': mine } });
  assert.equal(d.status, 200);
  r = await post(aasd.mcpUrl, rpc('ping'), { 'Mcp-Session-Id': mine });
  assert.equal(r.status, 404);
  assert.equal(r.json.error.code, -32001);
  const again = await fetch(aasd.mcpUrl, { method: 'DELETE', headers: { 'Mcp-Session-Id': mine } });
  assert.equal(again.status, 404);
});

test('400 for an unsupported MCP-Protocol-Version', async () => {
  const r = await post(aasd.mcpUrl, rpc('ping'), { ...S(), 'MCP-Protocol-Version': '1999-01-01' });
  assert.equal(r.status, 400);
  assert.match(r.json.error.message, /MCP-Protocol-Version/);
});

test('a 2026-07-28 server/discover without the revision\'s headers gets 400 with -32020', async () => {
  const r = await post(aasd.mcpUrl, rpc('server/discover', {}),
    { 'MCP-Protocol-Version': '2026-07-28' });
  assert.equal(r.status, 400);
  assert.equal(r.json.error.code, -32020);
});

test('403 for a foreign Origin, loopback origins allowed', async () => {
  let r = await post(aasd.mcpUrl, rpc('ping'), { ...S(), Origin: 'http://evil.example' });
  assert.equal(r.status, 403);
  r = await post(aasd.mcpUrl, rpc('ping'), { ...S(), Origin: 'http://localhost:6274' });
  assert.equal(r.status, 200);
});

test('405 for other methods, with Allow', async () => {
  const r = await fetch(aasd.mcpUrl, { method: 'PUT', headers: S() });
  assert.equal(r.status, 405);
  assert.match(r.headers.get('allow'), /POST/);
});

test('406 when Accept lacks a required type', async () => {
  let r = await post(aasd.mcpUrl, rpc('ping'), { ...S(), Accept: 'application/json' });
  assert.equal(r.status, 406);
  r = await post(aasd.mcpUrl, rpc('ping'), { ...S(), Accept: 'text/event-stream' });
  assert.equal(r.status, 406);
  const g = await fetch(aasd.mcpUrl, { headers: { ...S(), Accept: 'application/json' } });
  assert.equal(g.status, 406);
});

test('413 above the body limit, and the server keeps serving', async () => {
  const big = JSON.stringify(rpc('tools/call', { name: 'get_service_info', arguments: { pad: 'x'.repeat(70000) } }));
  const r = await post(aasd.mcpUrl, big, S());
  assert.equal(r.status, 413);
  const ok = await post(aasd.mcpUrl, rpc('ping'), S());
  assert.equal(ok.status, 200);
});

test('415 for a non-JSON content type', async () => {
  const r = await post(aasd.mcpUrl, JSON.stringify(rpc('ping')), { ...S(), 'Content-Type': 'text/plain' });
  assert.equal(r.status, 415);
});

test('malformed JSON, empty body and invalid UTF-8 are -32700', async () => {
  for (const body of ['{"jsonrpc":', '', Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d])]) {
    const r = await fetch(aasd.mcpUrl, { method: 'POST', headers: { ...JSON_HEADERS, ...S() }, body });
    assert.equal(r.status, 400);
    const j = await r.json();
    assert.equal(j.error.code, -32700);
    assert.equal(j.id, null);
  }
});

test('deeply nested JSON is refused cleanly', async () => {
  const deep = '['.repeat(30000) + ']'.repeat(30000);
  const r = await post(aasd.mcpUrl, deep, S());
  assert.equal(r.status, 400);
  assert.equal(r.json.error.code, -32700);
  assert.equal((await fetch(`${aasd.url}/healthz`)).status, 200);
});

test('bad jsonrpc version and bad id types are -32600', async () => {
  let r = await post(aasd.mcpUrl, { jsonrpc: '1.0', id: 1, method: 'ping' }, S());
  assert.equal(r.status, 400);
  assert.equal(r.json.error.code, -32600);
  assert.equal(r.json.id, 1);
  for (const id of [null, 1.5, true, { a: 1 }, [1]]) {
    r = await post(aasd.mcpUrl, { jsonrpc: '2.0', id, method: 'ping' }, S());
    assert.equal(r.status, 400, `id ${JSON.stringify(id)}`);
    assert.equal(r.json.error.code, -32600);
  }
  r = await post(aasd.mcpUrl, rpc('ping', undefined, 'string-id'), S());
  assert.equal(r.json.id, 'string-id');
});

test('unknown method is -32601, unknown tool is -32602', async () => {
  let r = await post(aasd.mcpUrl, rpc('resources/list'), S());
  assert.equal(r.status, 200);
  assert.equal(r.json.error.code, -32601);
  r = await post(aasd.mcpUrl, rpc('tools/call', { name: 'no_such_tool', arguments: {} }), S());
  assert.equal(r.json.error.code, -32602);
  assert.match(r.json.error.message, /no_such_tool/);
});

test('argument errors are isError results naming the field; nothing else changes', async () => {
  const H = K();
  const cases = [
    [{ name: 'run_command', arguments: { sandbox_id: 'sbx-0123456789abcdef' } }, /command: required/],
    [{ name: 'run_command', arguments: { sandbox_id: 'sbx-0123456789abcdef', command: 5 } }, /command: must be string/],
    [{ name: 'run_command', arguments: { sandbox_id: 'sbx-0123456789abcdef', command: 'x', bogus: 1 } }, /bogus: unknown field/],
    [{ name: 'read_file', arguments: { sandbox_id: 'sbx-0123456789abcdef', path: 'a\u0000b' } }, /path: must not contain a NUL/],
    [{ name: 'read_file', arguments: { sandbox_id: 'sbx-0123456789abcdef', path: '/x', offset: -1 } }, /offset: must be at least 0/],
    [{ name: 'get_sandbox', arguments: { sandbox_id: 'nope' } }, /sandbox_id: does not match/],
    [{ name: 'create_sandbox', arguments: { size: 'huge' } }, /size: must be one of/],
    [{ name: 'extend_sandbox', arguments: { sandbox_id: 'sbx-0123456789abcdef', minutes: 0 } }, /minutes: must be at least 1/],
    [{ name: 'expose_port', arguments: { sandbox_id: 'sbx-0123456789abcdef', port: 70000 } }, /port: must be at most 65535/],
  ];
  for (const [params, re] of cases) {
    const r = await post(aasd.mcpUrl, rpc('tools/call', params), H);
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /application\/json/, 'errors are answered at once, not streamed');
    assert.equal(r.json.result.isError, true, JSON.stringify(params));
    assert.match(r.json.result.content[0].text, re);
  }
});

test('a request with a progress token is answered as SSE', async () => {
  const r = await post(aasd.mcpUrl, rpc('tools/call',
    { name: 'get_service_info', arguments: {}, _meta: { progressToken: 'p1' } }), S());
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /text\/event-stream/);
  const msgs = sseMessages(r.text);
  assert.equal(msgs.at(-1).id, 7);
  assert.equal(msgs.at(-1).result.structuredContent.name, 'aas');
});

test('GET opens an SSE stream that DELETE ends', async () => {
  const mine = await openSession(aasd.mcpUrl);
  const g = await fetch(aasd.mcpUrl, { headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': mine } });
  assert.equal(g.status, 200);
  assert.match(g.headers.get('content-type'), /text\/event-stream/);
  const body = g.text();
  await fetch(aasd.mcpUrl, { method: 'DELETE', headers: { 'Mcp-Session-Id': mine } });
  assert.equal(await body, '');
});

test('batches only under 2025-03-26', async () => {
  const old = await openSession(aasd.mcpUrl, {}, '2025-03-26');
  const batch = [rpc('ping', undefined, 1), { jsonrpc: '2.0', method: 'notifications/x' }, rpc('tools/list', undefined, 2)];
  let r = await post(aasd.mcpUrl, batch, { 'Mcp-Session-Id': old });
  assert.equal(r.status, 200);
  assert.deepEqual(r.json.map((m) => m.id), [1, 2]);
  r = await post(aasd.mcpUrl, batch, S());
  assert.equal(r.status, 400);
  assert.equal(r.json.error.code, -32600);
});

test('401 with WWW-Authenticate for an invalid or revoked key', async () => {
  let r = await post(aasd.mcpUrl, rpc('ping'), { ...S(), 'x-api-key': 'aas_sk_nope' });
  assert.equal(r.status, 401);
  assert.match(r.headers.get('www-authenticate'), /^Bearer error="invalid_token"/);
  const acct = await newAccount();
  const mine = { 'Mcp-Session-Id': await openSession(aasd.mcpUrl, { Authorization: `Bearer ${acct.api_key}` }),
    'MCP-Protocol-Version': PROTOCOL };
  r = await post(aasd.mcpUrl, rpc('ping'), { ...mine, Authorization: `Bearer ${acct.api_key}` });
  assert.equal(r.status, 200);
  await aasctl('key', 'revoke', '--key', acct.key_id);
  // Revocation reaches every aasd through a database notification.
  const t0 = Date.now();
  do {
    r = await post(aasd.mcpUrl, rpc('ping'), { ...mine, Authorization: `Bearer ${acct.api_key}` });
  } while (r.status === 200 && Date.now() - t0 < 1000);
  assert.equal(r.status, 401);
});

test('a tool call without a credential is 401 with its own id, where to get a key and both headers', async () => {
  const r = await post(aasd.mcpUrl,
    rpc('tools/call', { name: 'list_sandboxes', arguments: {} }, 'call-41'), S());
  assert.equal(r.status, 401);
  assert.match(r.headers.get('www-authenticate'), /resource_metadata=/);
  assert.equal(r.json.jsonrpc, '2.0');
  assert.equal(r.json.id, 'call-41');
  const msg = r.json.error.message;
  assert.ok(msg.includes(`${aasd.url}/signup`), msg);
  assert.match(msg, /Authorization: Bearer <key>/);
  assert.match(msg, /x-api-key: <key>/);
});

test('a key in the query string is refused and never logged', async () => {
  for (const name of ['apiKey', 'api_key', 'key', 'token']) {
    const r = await post(`${aasd.mcpUrl}?${name}=${account.api_key}`, rpc('ping'), S());
    assert.equal(r.status, 400);
    assert.match(r.json.error.message, /header/);
  }
  await post(aasd.mcpUrl, rpc('ping'), K());
  assert.ok(!aasd.log().includes(account.api_key), 'the key never appears in the log');
  assert.ok(!aasd.log().includes('apiKey='), 'query strings are not logged');
});

test('with AAS_OAUTH=0 the OAuth discovery URLs answer a JSON 404', async () => {
  const keysOnly = await startAasd({ AAS_OAUTH: '0' });
  try {
    for (const p of ['oauth-protected-resource', 'oauth-protected-resource/v1/mcp',
      'oauth-authorization-server']) {
      const r = await fetch(`${keysOnly.url}/.well-known/${p}`);
      assert.equal(r.status, 404, p);
      assert.match((await r.json()).error.message, /API keys/);
    }
  } finally {
    await keysOnly.stop();
  }
});

test('one log line per request with method, path, status, duration and request id', async () => {
  const r = await post(aasd.mcpUrl, rpc('tools/list'), S());
  const id = r.headers.get('x-request-id');
  let line;
  for (let i = 0; i < 100 && !line; i++) {
    line = aasd.log().split('\n').find((l) => l.includes(`id=${id}`));
    if (!line) await sleep(20);
  }
  assert.match(line, /method=POST path=\/v1\/mcp status=200 dur_ms=[0-9.]+ rpc=tools\/list/);
});

test('idle SSE streams get keep-alive comments', async () => {
  const fast = await startAasd({ AAS_SSE_KEEPALIVE_S: '1' });
  try {
    const mine = await openSession(fast.mcpUrl);
    const ctrl = new AbortController();
    const g = await fetch(fast.mcpUrl, { headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': mine },
      signal: ctrl.signal });
    assert.equal(g.status, 200);
    const reader = g.body.getReader();
    const t0 = Date.now();
    let text = '';
    while (!text.includes(': keep-alive') && Date.now() - t0 < 5000) {
      const { value, done } = await reader.read();
      if (done) break;
      text += Buffer.from(value).toString();
    }
    assert.match(text, /^: keep-alive\n\n/);
    ctrl.abort();
  } finally {
    await fast.stop();
  }
});
