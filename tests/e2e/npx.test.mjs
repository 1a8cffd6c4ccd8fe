// The npx install path: `AAS_API_KEY=... npx -y <origin>/mcp.tgz` starts
// aas-mcp-remote, a stdio MCP server that forwards to /v1/mcp. Driven here
// by the official SDK's stdio client against a local aasd with VMs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { startAasd, vmEnv, newAccount } from './lib/harness.mjs';

let aasd;
let account;
let cache;
const made = [];

before(async () => {
  aasd = await startAasd(vmEnv('npx'));
  account = await newAccount();
  cache = mkdtempSync(path.join(os.tmpdir(), 'aas-test-npm-'));
});
after(async () => {
  for (const id of made) {
    await fetch(`${aasd.url}/v1/sandboxes/${id}`, { method: 'DELETE', headers: { 'x-api-key': account.api_key } })
      .catch(() => {});
  }
  await aasd?.stop();
  if (cache) rmSync(cache, { recursive: true, force: true });
});

// npm with a cache of its own and no registry: the package has no
// dependencies, and nothing may leave 127.0.0.1.
function npmEnv(extra = {}) {
  return {
    PATH: process.env.PATH,
    HOME: cache,
    npm_config_cache: path.join(cache, 'npm'),
    npm_config_registry: 'http://127.0.0.1:9/',
    npm_config_update_notifier: 'false',
    npm_config_audit: 'false',
    npm_config_fund: 'false',
    ...extra,
  };
}

test('the package is a gzip tarball with the program, its version and this origin', async () => {
  const r = await fetch(`${aasd.url}/mcp.tgz`);
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('content-type'), 'application/gzip');
  const file = path.join(cache, 'mcp.tgz');
  const { writeFileSync } = await import('node:fs');
  writeFileSync(file, Buffer.from(await r.arrayBuffer()));
  const list = await new Promise((res, rej) => execFile('tar', ['tzf', file], (e, out) => (e ? rej(e) : res(out))));
  assert.deepEqual(list.trim().split('\n').sort(),
    ['package/bin/aas-mcp-remote.js', 'package/config.json', 'package/package.json']);
  const cfg = await new Promise((res, rej) => execFile('tar', ['xzOf', file, 'package/config.json'],
    (e, out) => (e ? rej(e) : res(JSON.parse(out)))));
  assert.equal(cfg.baseUrl, aasd.url);
});

test('without AAS_API_KEY it says so and exits 2', async () => {
  const r = await new Promise((res) => execFile('npx', ['-y', `${aasd.url}/mcp.tgz`],
    { env: npmEnv(), timeout: 120000 }, (e, stdout, stderr) => res({ code: e ? e.code : 0, stderr })));
  assert.equal(r.code, 2);
  assert.match(r.stderr, /AAS_API_KEY is not set/);
});

test('the SDK stdio client lists the tools, creates a sandbox and runs a command through it', async () => {
  const transport = new StdioClientTransport({
    command: 'npx', args: ['-y', `${aasd.url}/mcp.tgz`],
    env: npmEnv({ AAS_API_KEY: account.api_key }),
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (d) => { stderr += d; });
  const client = new Client({ name: 'aas-npx-e2e', version: '1.0.0' });
  try {
    await client.connect(transport);
    assert.equal(client.getServerVersion().name, 'aas');
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === 'create_sandbox'));
    assert.ok(!tools.some((t) => t.name === 'sync_to_sandbox'), 'no tool of its own');
    const created = await client.callTool({ name: 'create_sandbox', arguments: { timeout_minutes: 5 } },
      undefined, { timeout: 300000 });
    assert.ok(!created.isError, created.content?.[0]?.text);
    const id = created.structuredContent.sandbox_id;
    made.push(id);
    const progress = [];
    const ran = await client.callTool({ name: 'run_command',
      arguments: { sandbox_id: id, command: 'for i in 1 2 3; do echo line $i; sleep 0.2; done' } },
    undefined, { timeout: 120000, onprogress: (p) => progress.push(p) });
    assert.ok(!ran.isError, ran.content?.[0]?.text);
    assert.equal(ran.structuredContent.stdout, 'line 1\nline 2\nline 3\n');
    assert.ok(progress.length >= 1, 'progress streams through the forwarder');
    const bad = await client.callTool({ name: 'get_sandbox', arguments: { sandbox_id: 'sbx-nope' } });
    assert.ok(bad.isError, 'the service\'s errors come through as they are');
  } catch (e) {
    e.message += `\n--- forwarder stderr ---\n${stderr}`;
    throw e;
  } finally {
    await client.close();
  }
});
