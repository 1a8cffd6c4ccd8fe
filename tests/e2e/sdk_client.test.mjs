// The official MCP TypeScript SDK client against the real aasd.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startAasd, newAccount } from './lib/harness.mjs';

const TOOL_NAMES = [
  'create_sandbox', 'delete_snapshot', 'destroy_sandbox', 'expose_port', 'extend_sandbox',
  'get_command', 'get_sandbox', 'get_service_info', 'get_usage', 'kill_command', 'list_files',
  'list_sandboxes', 'list_snapshots', 'pause_sandbox', 'read_file', 'resume_sandbox',
  'run_command', 'snapshot_sandbox', 'write_file',
];

let aasd;
let account;

before(async () => {
  aasd = await startAasd();
  account = await newAccount();
});
after(async () => { await aasd?.stop(); });

async function connect(headers) {
  const transport = new StreamableHTTPClientTransport(new URL(aasd.mcpUrl),
    headers ? { requestInit: { headers } } : {});
  const client = new Client({ name: 'aas-e2e', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

test('anonymous client lists exactly the 19 tools with complete metadata', async () => {
  const { client, transport } = await connect();
  const info = client.getServerVersion();
  assert.equal(info.name, 'aas');
  // One icon, for the server, by URL: no tool repeats it.
  assert.equal(info.icons?.[0]?.mimeType, 'image/svg+xml');
  assert.equal(info.icons[0].src, `${aasd.url}/static/icon.svg`);
  assert.equal((await fetch(info.icons[0].src)).status, 200);
  const guide = client.getInstructions();
  assert.ok(guide.includes('create_sandbox') && guide.includes('0.0.0.0'), guide);
  assert.ok(guide.length < 1536, `instructions are ${guide.length} bytes`);
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), TOOL_NAMES);
  for (const t of tools) {
    assert.ok(t.title, `${t.name} title`);
    assert.equal(t.icons, undefined, `${t.name} carries no icon`);
    assert.ok(!JSON.stringify(t).includes('x-mcp-header'), `${t.name}: no 2026-07-28 marks`);
    assert.ok(t.description.length > 40, `${t.name} description`);
    assert.equal(t.inputSchema.type, 'object', `${t.name} inputSchema`);
    assert.equal(t.outputSchema.type, 'object', `${t.name} outputSchema`);
    assert.equal(typeof t.annotations.readOnlyHint, 'boolean', `${t.name} annotations`);
    assert.ok(!JSON.stringify(t).includes('$ref'), `${t.name} schemas are self-contained`);
  }
  await transport.terminateSession();
  await client.close();
});

test('get_service_info works without a key and matches its output schema', async () => {
  const { client, transport } = await connect();
  const r = await client.callTool({ name: 'get_service_info', arguments: {} });
  assert.ok(!r.isError);
  const s = r.structuredContent;
  assert.equal(s.name, 'aas');
  assert.deepEqual(s.protocol_versions, ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26']);
  assert.equal(s.tools.length, 19);
  assert.ok(s.auth.headers.some((h) => h.startsWith('x-api-key')));
  assert.ok(s.endpoints.mcp.endsWith('/v1/mcp'));
  assert.deepEqual(s.sizes.map((z) => z.name), ['small', 'medium', 'large']);
  assert.ok(s.pricing.free_credit_new_account > 0);
  assert.deepEqual(JSON.parse(r.content[0].text), s, 'text content carries the same JSON');
  await transport.terminateSession();
  await client.close();
});

test('get_service_info with a progress token is answered over SSE', async () => {
  const { client, transport } = await connect();
  const r = await client.callTool({ name: 'get_service_info', arguments: {} }, undefined,
    { onprogress: () => {} });
  assert.equal(r.structuredContent.name, 'aas');
  await transport.terminateSession();
  await client.close();
});

test('run_command without a key is refused with 401 naming the headers and the OAuth metadata', async () => {
  const { client, transport } = await connect();
  // A client without OAuth support sees the 401's text: what to send.
  await assert.rejects(client.callTool({ name: 'run_command',
    arguments: { sandbox_id: 'sbx-0123456789abcdef', command: 'true' } }),
  (err) => /401/.test(String(err?.code ?? '') + err.message) && /x-api-key/.test(err.message)
    && /Authorization: Bearer/.test(err.message));
  await transport.terminateSession();
  await client.close();
});

test('with AAS_OAUTH=0, run_command without a key is an isError result naming the headers', async () => {
  const keysOnly = await startAasd({ AAS_OAUTH: '0' });
  try {
    const transport = new StreamableHTTPClientTransport(new URL(keysOnly.mcpUrl));
    const client = new Client({ name: 'aas-e2e', version: '1.0.0' });
    await client.connect(transport);
    const r = await client.callTool({ name: 'run_command',
      arguments: { sandbox_id: 'sbx-0123456789abcdef', command: 'true' } });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /x-api-key/);
    assert.match(r.content[0].text, /Authorization: Bearer/);
    await transport.terminateSession();
    await client.close();
  } finally {
    await keysOnly.stop();
  }
});

test('a bad key is refused with HTTP 401', async () => {
  const transport = new StreamableHTTPClientTransport(new URL(aasd.mcpUrl),
    { requestInit: { headers: { 'x-api-key': 'aas_sk_' + 'A'.repeat(43) } } });
  const client = new Client({ name: 'aas-e2e', version: '1.0.0' });
  await assert.rejects(client.connect(transport), (err) => /401/.test(String(err?.code ?? '') + err.message));
});

for (const [label, headersOf] of [
  ['x-api-key', (k) => ({ 'x-api-key': k })],
  ['Authorization: Bearer', (k) => ({ Authorization: `Bearer ${k}` })],
]) {
  test(`a good key in ${label} passes auth`, async () => {
    const { client, transport } = await connect(headersOf(account.api_key));
    const r = await client.callTool({ name: 'run_command',
      arguments: { sandbox_id: 'sbx-0123456789abcdef', command: 'true' } });
    // Authenticated: whatever the tool answers, it is not an auth error.
    assert.doesNotMatch(r.content[0].text, /unauthorized|needs an API key/);
    const bad = await client.callTool({ name: 'create_sandbox', arguments: { size: 'huge' } });
    assert.equal(bad.isError, true);
    assert.match(bad.content[0].text, /size: must be one of: small, medium, large/);
    await transport.terminateSession();
    await client.close();
  });
}
