// The server card for Smithery (/.well-known/mcp/server-card.json), and a
// client that sends only what Smithery sends: the key as x-api-key.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startAasd, newAccount } from './lib/harness.mjs';

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
  const client = new Client({ name: 'aas-smithery-e2e', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

test('the server card is JSON describing the server, its transport and 19 tools', async () => {
  const r = await fetch(`${aasd.url}/.well-known/mcp/server-card.json`);
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^application\/json/);
  assert.equal(r.headers.get('access-control-allow-origin'), '*');
  const card = JSON.parse(await r.text());
  assert.equal(card.serverInfo.name, 'aas');
  assert.equal(card.serverInfo.version, '0.2.0');
  assert.ok(card.serverInfo.title && card.description);
  assert.equal(card.protocolVersion, '2025-11-25');
  assert.equal(card.transport.type, 'streamable-http');
  assert.equal(card.transport.endpoint, '/v1/mcp');
  assert.equal(card.transport.url, aasd.mcpUrl);
  assert.equal(card.authentication.required, true);
  assert.deepEqual(card.resources, []);
  assert.deepEqual(card.prompts, []);

  // The same tools, descriptions and schemas as tools/list.
  const client = await connect();
  const { tools } = await client.listTools();
  await client.close();
  assert.equal(card.tools.length, 19);
  assert.deepEqual(card.tools.map((t) => t.name), tools.map((t) => t.name));
  for (const t of card.tools) {
    const live = tools.find((x) => x.name === t.name);
    assert.equal(t.description, live.description, t.name);
    assert.equal(t.title, live.title, t.name);
    assert.deepEqual(t.inputSchema, live.inputSchema, `${t.name} inputSchema`);
    assert.equal(t.inputSchema.type, 'object');
    assert.ok(!JSON.stringify(t).includes('$ref'), `${t.name} is self-contained`);
  }
  const head = await fetch(`${aasd.url}/.well-known/mcp/server-card.json`, { method: 'HEAD' });
  assert.equal(head.status, 200);
  const put = await fetch(`${aasd.url}/.well-known/mcp/server-card.json`, { method: 'PUT' });
  assert.equal(put.status, 405);
});

test('the config schema asks for apiKey and sends it as the x-api-key header', async () => {
  const card = await (await fetch(`${aasd.url}/.well-known/mcp/server-card.json`)).json();
  const schema = card.configSchema;
  assert.equal(schema.type, 'object');
  assert.deepEqual(schema.required, ['apiKey']);
  assert.deepEqual(Object.keys(schema.properties), ['apiKey']);
  assert.equal(schema.properties.apiKey.type, 'string');
  assert.deepEqual(schema.properties.apiKey['x-from'], { header: 'x-api-key' });
  assert.ok(JSON.stringify(schema).length < 1024, 'within Smithery\'s 1 KB limit');
});

test('a client sending only x-api-key makes authenticated calls', async () => {
  const client = await connect({ 'x-api-key': account.api_key });
  const r = await client.callTool({ name: 'get_usage', arguments: {} });
  assert.ok(!r.isError, r.content?.[0]?.text);
  assert.equal(r.structuredContent.balance, 200000);
  assert.equal(r.structuredContent.currency, 'USD');
  await client.close();

  // Without it the same call is refused with 401 (so the header is what
  // worked); the answer says which header to send.
  const anon = await connect();
  await assert.rejects(anon.callTool({ name: 'get_usage', arguments: {} }),
    (err) => /401/.test(String(err?.code ?? '') + err.message) && /x-api-key/.test(err.message));
  await anon.close();
});
