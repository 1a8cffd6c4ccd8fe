// MCP revision 2026-07-28 beside the older ones on /v1/mcp: the official
// v2 TypeScript client negotiates it (server/discover) and runs every
// tool; the same client left to its default, and the 1.x client of the
// other tests, stay on 2025-11-25 with sessions. Raw requests check the
// revision's header and _meta rules and its error codes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { startAasd, vmEnv, newAccount, waitFor } from './lib/harness.mjs';

const V = '2026-07-28';
const TASK_CAP = 16384;
const TASK_BYTES = 65536;
let aasd;
let account;
const made = [];

before(async () => {
  // Keep-alives every second: a closed response stream is noticed soon.
  // Small task storage: a result is cut past 16 KiB, an account keeps 64 KiB.
  aasd = await startAasd(vmEnv('mcp2026', { AAS_SSE_KEEPALIVE_S: '1',
    AAS_TASK_RESULT_MAX_BYTES: String(TASK_CAP), AAS_TASK_BYTES_PER_ACCOUNT: String(TASK_BYTES) }));
  account = await newAccount();
});
after(async () => {
  for (const id of made) {
    await fetch(`${aasd.url}/v1/sandboxes/${id}`, { method: 'DELETE', headers: { 'x-api-key': account.api_key } })
      .catch(() => {});
  }
  await aasd?.stop();
});

async function connect({ key, mode = 'auto' } = {}) {
  const transport = new StreamableHTTPClientTransport(new URL(aasd.mcpUrl),
    key ? { requestInit: { headers: { 'x-api-key': key } } } : {});
  const client = new Client({ name: 'aas-v2-e2e', version: '1.0.0' },
    mode ? { versionNegotiation: { mode } } : {});
  await client.connect(transport);
  return client;
}

// One raw request of the revision, with whatever headers and _meta the case needs.
async function raw(method, params = {}, { headers = {}, meta, id = 1, omit = [] } = {}) {
  const body = {
    jsonrpc: '2.0', id, method,
    params: {
      ...params,
      _meta: meta ?? {
        'io.modelcontextprotocol/protocolVersion': V,
        'io.modelcontextprotocol/clientCapabilities': {},
        'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
      },
    },
  };
  const h = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': V,
    'mcp-method': method,
    ...(method === 'tools/call' ? { 'mcp-name': params.name } : {}),
    ...headers,
  };
  for (const o of omit) delete h[o];
  const r = await fetch(aasd.mcpUrl, { method: 'POST', headers: h, body: JSON.stringify(body) });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* SSE or empty */ }
  return { status: r.status, headers: r.headers, text, json };
}

test('the v2 client negotiates 2026-07-28 and runs the whole tool surface', async () => {
  const client = await connect({ key: account.api_key });
  assert.equal(client.getNegotiatedProtocolVersion(), V);
  assert.equal(client.getServerVersion().name, 'aas');
  const { tools } = await client.listTools();
  assert.equal(tools.length, 19);
  const call = async (name, args, opts = {}) => {
    const r = await client.callTool({ name, arguments: args }, undefined, { timeout: 300000, ...opts });
    assert.ok(!r.isError, `${name}: ${r.content?.[0]?.text}`);
    return r.structuredContent;
  };
  assert.equal((await call('get_service_info', {})).name, 'aas');
  const id = (await call('create_sandbox', { timeout_minutes: 10 })).sandbox_id;
  made.push(id);
  // Progress goes out on the response stream (checked raw below); the v2
  // client 2.4.0 does not hand it to onprogress under this revision.
  const ran = await call('run_command', { sandbox_id: id, command: 'for i in 1 2 3; do echo l$i; sleep 0.2; done' },
    { onprogress: () => {} });
  assert.equal(ran.stdout, 'l1\nl2\nl3\n');
  await call('write_file', { sandbox_id: id, path: 'hello.txt', content: 'héllo' });
  assert.equal((await call('read_file', { sandbox_id: id, path: 'hello.txt' })).content, 'héllo');
  assert.ok((await call('list_files', { sandbox_id: id, path: '.' })).entries.some((e) => e.path.endsWith('hello.txt')));
  assert.match((await call('expose_port', { sandbox_id: id, port: 8000 })).url, /^http/);
  assert.equal((await call('get_sandbox', { sandbox_id: id })).state, 'running');
  assert.ok((await call('list_sandboxes', {})).sandboxes.some((s) => s.sandbox_id === id));
  assert.ok((await call('extend_sandbox', { sandbox_id: id, minutes: 1 })).expires_at);
  const bg = await call('run_command', { sandbox_id: id, command: 'sleep 30; echo done', background: true });
  const st = await call('get_command', { sandbox_id: id, command_id: bg.command_id });
  assert.equal(st.state, 'running');
  await call('kill_command', { sandbox_id: id, command_id: bg.command_id });
  assert.ok((await call('get_usage', {})).balance >= 0);
  assert.equal((await call('destroy_sandbox', { sandbox_id: id })).state, 'destroyed');
  await client.close();
});

test('the same client left to its default, and an anonymous one, keep the older revisions', async () => {
  const legacy = await connect({ key: account.api_key, mode: null });
  assert.equal(legacy.getNegotiatedProtocolVersion(), '2025-11-25');
  assert.ok((await legacy.callTool({ name: 'get_usage', arguments: {} })).structuredContent);
  await legacy.close();
  const anon = await connect();
  assert.equal(anon.getNegotiatedProtocolVersion(), V);
  // Without a credential (and no OAuth provider) the call is a 401 that
  // says what to send; tests/e2e/oauth.test.mjs follows it through OAuth.
  await assert.rejects(anon.callTool({ name: 'get_usage', arguments: {} }), /API key/);
  await anon.close();
});

test('results carry resultType and serverInfo; tools/list can be cached; no session', async () => {
  const d = await raw('server/discover');
  assert.equal(d.status, 200);
  assert.equal(d.headers.get('mcp-session-id'), null);
  assert.equal(d.json.result.resultType, 'complete');
  assert.ok(d.json.result.supportedVersions.includes(V));
  assert.ok(d.json.result.supportedVersions.includes('2025-11-25'));
  assert.equal(d.json.result._meta['io.modelcontextprotocol/serverInfo'].name, 'aas');
  const l = await raw('tools/list');
  assert.equal(l.json.result.resultType, 'complete');
  assert.equal(l.json.result.cacheScope, 'public');
  assert.ok(l.json.result.ttlMs > 0);
  const sb = l.json.result.tools.find((t) => t.name === 'get_sandbox');
  assert.equal(sb.inputSchema.properties.sandbox_id['x-mcp-header'], 'Sandbox-Id');
  const c = await raw('tools/call', { name: 'get_service_info', arguments: {} });
  assert.equal(c.json.result.resultType, 'complete');
  // A session id sent along is ignored, never echoed.
  const s = await raw('tools/list', {}, { headers: { 'mcp-session-id': 'not-a-session' } });
  assert.equal(s.status, 200);
  assert.equal(s.headers.get('mcp-session-id'), null);
});

test('the revision\'s errors: versions, headers, _meta, batches, methods, GET', async () => {
  let r = await raw('tools/list', {}, { headers: { 'mcp-method': 'tools/call' } });
  assert.deepEqual([r.status, r.json.error.code], [400, -32020]);
  r = await raw('tools/list', {}, { omit: ['mcp-method'] });
  assert.deepEqual([r.status, r.json.error.code], [400, -32020]);
  r = await raw('tools/call', { name: 'get_service_info', arguments: {} }, { headers: { 'mcp-name': 'get_usage' } });
  assert.deepEqual([r.status, r.json.error.code], [400, -32020]);
  r = await raw('tools/call', { name: 'get_service_info', arguments: {} }, { omit: ['mcp-name'] });
  assert.deepEqual([r.status, r.json.error.code], [400, -32020]);
  r = await raw('tools/call', { name: 'get_sandbox', arguments: { sandbox_id: 'sbx-0123456789abcdef' } },
    { headers: { 'mcp-param-sandbox-id': 'sbx-aaaaaaaaaaaaaaaa' } });
  assert.deepEqual([r.status, r.json.error.code], [400, -32020]);
  r = await raw('tools/call', { name: 'get_sandbox', arguments: { sandbox_id: 'sbx-0123456789abcdef' } });
  assert.deepEqual([r.status, r.json.error.code], [400, -32020], 'the argument needs its header');
  r = await raw('tools/list', {}, { headers: { 'mcp-protocol-version': '2025-11-25' } });
  assert.deepEqual([r.status, r.json.error.code], [400, -32020]);
  r = await raw('tools/list', {}, {
    headers: { 'mcp-protocol-version': '2099-01-01' },
    meta: { 'io.modelcontextprotocol/protocolVersion': '2099-01-01', 'io.modelcontextprotocol/clientCapabilities': {} },
  });
  assert.deepEqual([r.status, r.json.error.code], [400, -32022]);
  assert.ok(r.json.error.data.supported.includes(V));
  assert.equal(r.json.error.data.requested, '2099-01-01');
  r = await raw('tools/list', {}, { meta: { 'io.modelcontextprotocol/protocolVersion': V } });
  assert.deepEqual([r.status, r.json.error.code], [400, -32602], 'clientCapabilities is required');
  r = await raw('ping');
  assert.deepEqual([r.status, r.json.error.code], [404, -32601], 'ping is gone in this revision');
  r = await raw('no/such/method');
  assert.deepEqual([r.status, r.json.error.code], [404, -32601]);
  const batch = await fetch(aasd.mcpUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream',
      'mcp-protocol-version': V, 'mcp-method': 'tools/list' },
    body: JSON.stringify([{ jsonrpc: '2.0', id: 1, method: 'tools/list',
      params: { _meta: { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': {} } } }]),
  });
  assert.equal(batch.status, 400);
  assert.equal((await batch.json()).error.code, -32600);
  for (const method of ['GET', 'DELETE']) {
    const g = await fetch(aasd.mcpUrl, { method, headers: { accept: 'text/event-stream', 'mcp-protocol-version': V } });
    assert.equal(g.status, 405, method);
  }
});

// Once a process whose whole command line is cmd runs in the guest: the
// call that started it is under way.
async function running(client, id, cmd) {
  await waitFor(`"${cmd}" to run`, async () => (await client.callTool({ name: 'run_command',
    arguments: { sandbox_id: id, command: `pgrep -fx "${cmd}" >/dev/null && echo yes || true` } })).structuredContent.stdout === 'yes\n', 60000);
}

test('closing the response stream cancels the call: the command is gone', async () => {
  const client = await connect({ key: account.api_key });
  const created = await client.callTool({ name: 'create_sandbox', arguments: { timeout_minutes: 5 } },
    undefined, { timeout: 300000 });
  const id = created.structuredContent.sandbox_id;
  made.push(id);
  await client.listTools();
  const ac = new AbortController();
  const pending = raw('tools/call', { name: 'run_command', arguments: { sandbox_id: id, command: 'sleep 120' } },
    { headers: { 'x-api-key': account.api_key, 'mcp-param-sandbox-id': id } });
  // The same request, aborted: raw() has no signal, so a second fetch is the one cut.
  const cut = fetch(aasd.mcpUrl, {
    method: 'POST',
    signal: ac.signal,
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream',
      'mcp-protocol-version': V, 'mcp-method': 'tools/call', 'mcp-name': 'run_command',
      'mcp-param-sandbox-id': id, 'x-api-key': account.api_key },
    body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'run_command',
      arguments: { sandbox_id: id, command: 'sleep 121' }, _meta: { progressToken: 9,
        'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': {} } } }),
  }).then((r) => r.text()).catch(() => 'aborted');
  await running(client, id, 'sleep 120');
  await running(client, id, 'sleep 121');
  ac.abort();
  assert.equal(await cut, 'aborted');
  let left = '';
  for (let i = 0; i < 40; i++) {
    const r = await client.callTool({ name: 'run_command', arguments: { sandbox_id: id, command: 'pgrep -fx "sleep 121" || echo none' } });
    left = r.structuredContent.stdout.trim();
    if (left === 'none') break;
    await new Promise((res) => setTimeout(res, 500));
  }
  assert.equal(left, 'none', 'the cut call\'s command was stopped');
  // The call whose stream stayed open is not touched.
  const still = await client.callTool({ name: 'run_command', arguments: { sandbox_id: id, command: 'pgrep -fx "sleep 120" >/dev/null && echo yes' } });
  assert.equal(still.structuredContent.stdout.trim(), 'yes');
  await client.callTool({ name: 'destroy_sandbox', arguments: { sandbox_id: id } });
  await pending.catch(() => {});
  await client.close();
});

const TASKS = { 'io.modelcontextprotocol/tasks': {} };
function taskMeta() {
  return {
    'io.modelcontextprotocol/protocolVersion': V,
    'io.modelcontextprotocol/clientCapabilities': { extensions: TASKS },
  };
}
async function taskRpc(url, method, params, extra = {}) {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream',
      'mcp-protocol-version': V, 'mcp-method': method,
      'mcp-name': method === 'tools/call' ? params.name : params.taskId,
      'x-api-key': account.api_key, ...extra },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: { ...params, _meta: taskMeta() } }),
  });
  return { status: r.status, json: await r.json() };
}
async function pollTask(url, id, want, limitMs = 120000, key = account.api_key) {
  const t0 = Date.now();
  for (;;) {
    const r = await taskRpc(url, 'tasks/get', { taskId: id }, { 'x-api-key': key });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    if (r.json.result.status === want) return r.json.result;
    assert.equal(r.json.result.status, 'working', JSON.stringify(r.json.result));
    if (Date.now() - t0 > limitMs) throw new Error(`task ${id} still ${r.json.result.status}`);
    await new Promise((res) => setTimeout(res, 500));
  }
}

test('tasks: a large result is cut with its marker, and past the account\'s task storage a task is refused naming the limit; another account is not', async () => {
  const acct = await newAccount();
  const key = { 'x-api-key': acct.api_key };
  const client = await connect({ key: acct.api_key });
  const created = await client.callTool({ name: 'create_sandbox', arguments: { timeout_minutes: 5 } },
    undefined, { timeout: 300000 });
  const id = created.structuredContent.sandbox_id;
  made.push(id);
  const big = { name: 'run_command', arguments: { sandbox_id: id, command: 'head -c 100000 /dev/zero | tr "\\0" y' } };
  // Each task reserves the cap and a row's KiB while it runs: three fit in 64 KiB, the fourth does not.
  let refused;
  const done = [];
  for (let i = 0; i < 5 && !refused; i++) {
    const r = await taskRpc(aasd.mcpUrl, 'tools/call', big, { ...key, 'mcp-param-sandbox-id': id });
    if (r.json.error) {
      refused = r.json.error;
      break;
    }
    assert.equal(r.json.result.resultType, 'task', JSON.stringify(r.json));
    done.push(await pollTask(aasd.mcpUrl, r.json.result.taskId, 'completed', 60000, acct.api_key));
  }
  assert.equal(done.length, 3);
  for (const t of done) {
    const res = t.result;
    assert.ok(JSON.stringify(res).length <= TASK_CAP, 'the kept result is within the cap');
    const mark = res._meta['aas/truncated'];
    assert.ok(mark.bytes > 100000 && mark.limit === TASK_CAP, JSON.stringify(mark));
    assert.deepEqual(mark.fields, ['structuredContent.stdout']);
    assert.match(res.structuredContent.stdout, /^y{1000,}$/);
    assert.match(res.content.at(-1).text, /This result was cut.*AAS_TASK_RESULT_MAX_BYTES/);
    assert.deepEqual(JSON.parse(res.content[0].text), res.structuredContent);
  }
  assert.equal(refused.code, -32000);
  assert.match(refused.message, /^task storage for this account is full \(64 KiB, AAS_TASK_BYTES_PER_ACCOUNT\)/);
  // Another account still starts tasks (this one ends as an error: not its sandbox).
  const other = await newAccount();
  const o = await taskRpc(aasd.mcpUrl, 'tools/call', big, { 'x-api-key': other.api_key, 'mcp-param-sandbox-id': id });
  assert.equal(o.json.result?.resultType, 'task', JSON.stringify(o.json));
  const od = await pollTask(aasd.mcpUrl, o.json.result.taskId, 'completed', 60000, other.api_key);
  assert.equal(od.result.isError, true);
  await client.callTool({ name: 'destroy_sandbox', arguments: { sandbox_id: id } });
  await client.close();
});

test('tasks: a 20 s command runs as a task, is polled to completion, another is cancelled, and a second aasd answers after the first is gone', async () => {
  const client = await connect({ key: account.api_key });
  await client.listTools(); // it sends Mcp-Param-Sandbox-Id once it knows the schemas
  const created = await client.callTool({ name: 'create_sandbox', arguments: { timeout_minutes: 5 } },
    undefined, { timeout: 300000 });
  const id = created.structuredContent.sandbox_id;
  made.push(id);
  const disc = await raw('server/discover');
  assert.ok(disc.json.result.capabilities.extensions['io.modelcontextprotocol/tasks']);

  const started = await taskRpc(aasd.mcpUrl, 'tools/call',
    { name: 'run_command', arguments: { sandbox_id: id, command: 'sleep 20; echo done' } },
    { 'mcp-param-sandbox-id': id });
  assert.equal(started.status, 200, JSON.stringify(started.json));
  assert.equal(started.json.result.resultType, 'task');
  assert.equal(started.json.result.status, 'working');
  const taskId = started.json.result.taskId;
  assert.match(taskId, /^task-[a-z0-9]{24}$/);
  // Without the opt-in the same call is answered as ever.
  const plain = await raw('tools/call', { name: 'get_service_info', arguments: {} });
  assert.equal(plain.json.result.resultType, 'complete');
  const done = await pollTask(aasd.mcpUrl, taskId, 'completed');
  assert.equal(done.result.structuredContent.stdout, 'done\n');

  const second = await taskRpc(aasd.mcpUrl, 'tools/call',
    { name: 'run_command', arguments: { sandbox_id: id, command: 'sleep 119' } },
    { 'mcp-param-sandbox-id': id });
  const t2 = second.json.result.taskId;
  await running(client, id, 'sleep 119');
  const c = await taskRpc(aasd.mcpUrl, 'tasks/cancel', { taskId: t2 });
  assert.deepEqual(c.json.result.resultType, 'complete');
  await pollTask(aasd.mcpUrl, t2, 'cancelled');
  const left = await client.callTool({ name: 'run_command', arguments: { sandbox_id: id, command: 'pgrep -fx "sleep 119" || echo none' } });
  assert.equal(left.structuredContent.stdout.trim(), 'none', 'the cancelled task\'s process is gone');

  // Other accounts see no task; unknown ids are -32602; tasks/* need the opt-in.
  const other = await newAccount();
  const r = await fetch(aasd.mcpUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream',
      'mcp-protocol-version': V, 'mcp-method': 'tasks/get', 'mcp-name': taskId, 'x-api-key': other.api_key },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { taskId, _meta: taskMeta() } }),
  });
  assert.equal((await r.json()).error.code, -32602);
  const noOpt = await raw('tasks/get', { taskId }, { headers: { 'mcp-name': taskId, 'x-api-key': account.api_key } });
  assert.equal(noOpt.json.error.code, -32021);
  assert.equal(noOpt.status, 400);

  await client.callTool({ name: 'destroy_sandbox', arguments: { sandbox_id: id } });
  await client.close();
  // The first aasd goes away for good; another one on the same database answers.
  await aasd.kill();
  const b = await startAasd({});
  try {
    const again = await pollTask(b.mcpUrl, taskId, 'completed');
    assert.equal(again.result.structuredContent.stdout, 'done\n');
  } finally {
    await b.stop();
  }
});
