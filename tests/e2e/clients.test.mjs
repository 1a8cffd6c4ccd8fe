// Six MCP clients that aas did not write, each driven through one sandbox
// lifecycle against a real aasd with VMs: list the tools, create_sandbox
// (small), run_command, write_file + read_file, destroy_sandbox. The
// versions are pinned in package.json; docs/clients.md has the working
// configuration of each. mcp-remote runs twice: with the key in a header,
// and with only the URL, through OAuth consent in headless Chromium.
// Nothing talks to anything but 127.0.0.1.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import {
  chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { createMCPClient } from '@ai-sdk/mcp';
import { MultiServerMCPClient } from '@langchain/mcp-adapters';
import { startAasd, vmEnv, newAccount, freePort, waitFor, ROOT } from './lib/harness.mjs';
import { startSmtpSink } from './lib/smtp.mjs';
import { WebClient, randomEmail, GOOD_PASSWORD, linkIn, signUpAndLogIn } from './lib/web.mjs';
import { launchBrowser, closeBrowser, formFill, clickAndWait } from './lib/browser.mjs';

const BIN = path.join(ROOT, 'node_modules/.bin');
// LangChain runs in this process: no LangSmith tracing, whatever the
// environment says.
process.env.LANGSMITH_TRACING = 'false';
process.env.LANGCHAIN_TRACING_V2 = 'false';
const LIFECYCLE = ['create_sandbox', 'run_command', 'write_file', 'read_file', 'destroy_sandbox'];

let aasd;
let smtp;
let account;
let tmp;
const made = []; // { id, auth } of sandboxes not yet destroyed
const children = new Set(); // processes started here, ended in after()
const bridges = new Set(); // SDK clients over stdio to an mcp-remote, closed in after()

before(async () => {
  smtp = await startSmtpSink();
  aasd = await startAasd(vmEnv('clients', {
    AAS_SMTP_URL: smtp.url,
    AAS_MAIL_FROM: 'aas test <noreply@aas.test>',
    AAS_ARGON2_M_KIB: '8192',
    AAS_ARGON2_T_COST: '1',
  }));
  account = await newAccount();
  tmp = mkdtempSync(path.join(os.tmpdir(), 'aas-test-clients-'));
});

after(async () => {
  for (const c of bridges) await c.close().catch(() => {});
  for (const p of children) {
    if (p.exitCode === null && p.signalCode === null) {
      const gone = new Promise((r) => p.once('exit', r));
      try { process.kill(-p.pid, 'SIGKILL'); } catch { try { p.kill('SIGKILL'); } catch { /* gone */ } }
      await Promise.race([gone, new Promise((r) => setTimeout(r, 5000))]);
    }
  }
  // Sandboxes a failed test left: destroyed through /v1/mcp (an OAuth
  // token is good there only), and waited for, before aasd stops (QEMU
  // would outlive it).
  for (const { id, auth } of made) await destroyOver(id, auth).catch(() => {});
  await aasd?.stop();
  await smtp?.stop();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

// destroy_sandbox as one stateless 2026-07-28 request; waits for the end.
async function destroyOver(id, auth) {
  const v = '2026-07-28';
  const call = (name) => fetch(aasd.mcpUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream',
      'mcp-protocol-version': v, 'mcp-method': 'tools/call', 'mcp-name': name, 'mcp-param-sandbox-id': id,
      ...auth },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call',
      params: { name, arguments: { sandbox_id: id },
        _meta: { 'io.modelcontextprotocol/protocolVersion': v,
          'io.modelcontextprotocol/clientCapabilities': {},
          'io.modelcontextprotocol/clientInfo': { name: 'cleanup', version: '1' } } } }),
  }).then((r) => r.text());
  await call('destroy_sandbox');
  await waitFor(`${id} destroyed`, async () => {
    const t = await call('get_sandbox');
    const m = t.match(/\\?"state\\?":\s*\\?"(\w+)/); // in structuredContent or the text's JSON
    return !m || m[1] === 'destroyed' || m[1] === 'failed';
  }, 30000);
}

// The environment of every client process: a HOME of its own (mcporter
// and mcp-remote keep state there), no telemetry, no update checks, no
// proxy from ours.
function clientEnv(extra = {}) {
  const home = path.join(tmp, 'home');
  return {
    PATH: process.env.PATH,
    HOME: home,
    XDG_CONFIG_HOME: path.join(home, '.config'),
    TMPDIR: os.tmpdir(),
    LANG: 'C.UTF-8',
    NO_COLOR: '1',
    CI: '1',
    DO_NOT_TRACK: '1',
    NO_UPDATE_NOTIFIER: '1',
    npm_config_update_notifier: 'false',
    npm_config_registry: 'http://127.0.0.1:9/',
    MCP_REMOTE_CONFIG_DIR: path.join(tmp, 'mcp-auth'),
    ...extra,
  };
}

// Runs a CLI to its end; resolves { code, stdout, stderr }.
function run(cmd, args, { env = clientEnv(), cwd = tmp, timeoutMs = 90000 } = {}) {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    children.add(p);
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => { try { process.kill(-p.pid, 'SIGKILL'); } catch { /* gone */ } }, timeoutMs);
    p.on('error', reject);
    p.on('exit', (code, sig) => {
      clearTimeout(timer);
      children.delete(p);
      resolve({ code: code ?? sig, stdout, stderr });
    });
  });
}

// A tool result as any client hands it back: the structured content, or
// the JSON in its text content (which carries the same object).
function structured(r, what) {
  if (typeof r === 'string') return JSON.parse(r);
  if (Array.isArray(r)) return structured({ content: r }, what);
  assert.ok(!r.isError, `${what}: ${JSON.stringify(r).slice(0, 500)}`);
  if (r.structuredContent) return r.structuredContent;
  // mcporter's --output json: the structured content itself (read_file's
  // has a "content" of its own, a string).
  if (!Array.isArray(r.content)) return r;
  const text = r.content?.find((c) => c.type === 'text')?.text;
  assert.ok(text, `${what}: no text content in ${JSON.stringify(r).slice(0, 500)}`);
  return JSON.parse(text);
}

// One sandbox lifecycle through a client: names() lists the tools,
// call(name, args) answers the tool's structured result.
async function lifecycle({ names, call }, auth) {
  const listed = await names();
  for (const n of LIFECYCLE) assert.ok(listed.includes(n), `${n} listed in ${listed}`);
  const created = await call('create_sandbox', { size: 'small' });
  const id = created.sandbox_id;
  assert.match(id, /^sbx-[0-9a-z]{16}$/, JSON.stringify(created));
  made.push({ id, auth });
  const ran = await call('run_command', { sandbox_id: id, command: 'echo hi' });
  assert.equal(ran.stdout, 'hi\n', JSON.stringify(ran));
  assert.equal(ran.exit_code, 0);
  const text = `from a client ${crypto.randomBytes(4).toString('hex')}`;
  const wrote = await call('write_file', { sandbox_id: id, path: '/tmp/client.txt', content: text });
  assert.equal(wrote.bytes_written, text.length, JSON.stringify(wrote));
  const read = await call('read_file', { sandbox_id: id, path: '/tmp/client.txt' });
  assert.equal(read.content, text, JSON.stringify(read));
  const gone = await call('destroy_sandbox', { sandbox_id: id });
  assert.ok(gone, 'destroy_sandbox answered');
  made.splice(made.findIndex((m) => m.id === id), 1);
  return id;
}

const keyHeader = () => ({ 'x-api-key': account.api_key });

// The official SDK speaking stdio to a bridge process.
async function stdioClient(command, args, env) {
  const transport = new StdioClientTransport({ command, args, env, stderr: 'pipe' });
  let stderr = '';
  const client = new Client({ name: 'aas-e2e-clients', version: '1.0.0' });
  bridges.add(client);
  const started = client.connect(transport);
  transport.stderr?.on('data', (d) => { stderr += d; });
  return { client, transport, started, stderr: () => stderr };
}

function sdkOps(client) {
  return {
    names: async () => (await client.listTools()).tools.map((t) => t.name),
    call: async (name, args) => structured(await client.callTool({ name, arguments: args }), name),
  };
}

// A verified dashboard account: signed up and its e-mail link opened.
async function dashboardUser() {
  const c = new WebClient(aasd.url);
  const email = randomEmail('clients');
  await signUpAndLogIn(c, email);
  const mail = await smtp.waitFor(email, { subject: 'Verify' });
  assert.equal((await c.openLink(linkIn(mail, '/verify?code='))).status, 200);
  return email;
}

// mcp-remote's tokens.json under its config directory (one folder per
// version, one file set per server URL hash).
function findTokens(dir) {
  const walk = (d) => {
    let entries = [];
    try { entries = readdirSync(d, { withFileTypes: true }); } catch { return null; }
    for (const e of entries) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) { const t = walk(p); if (t) return t; }
      if (e.name.endsWith('_tokens.json') || e.name === 'tokens.json') {
        try { return JSON.parse(readFileSync(p, 'utf8')); } catch { return null; }
      }
    }
    return null;
  };
  return walk(dir);
}

// The CLI reads its own package.json for the client's name: it tests
// "../package.json" against the working directory but imports it relative
// to its module, so it runs from its build directory (docs/clients.md).
const INSPECTOR_DIR = path.join(ROOT, 'node_modules/@modelcontextprotocol/inspector-cli/build');

// The lifecycles run three at a time (each its own sandbox; an account
// may have five alive): one after another they take over five minutes.
describe('third-party clients', { concurrency: 3 }, () => {
  test('mcp-remote with the key in --header, spoken to over stdio by the TypeScript SDK', async () => {
    const port = await freePort();
    const c = await stdioClient(path.join(BIN, 'mcp-remote'),
      [aasd.mcpUrl, String(port), '--header', `x-api-key:${account.api_key}`, '--transport', 'http-only'],
      clientEnv());
    try {
      await c.started;
      await lifecycle(sdkOps(c.client), keyHeader());
    } catch (e) {
      e.message += `\n--- mcp-remote stderr ---\n${c.stderr().slice(-3000)}`;
      throw e;
    } finally {
      await c.client.close().catch(() => {});
    }
  });

  test('mcp-remote with only the URL: OAuth consent in Chromium, the code to its callback', async () => {
    const email = await dashboardUser();
    // The "browser" mcp-remote opens: xdg-open (the one the open package
    // ships, which runs $BROWSER, and any on PATH) only writes the URL down.
    const fake = path.join(tmp, 'fakebin');
    const urlFile = path.join(tmp, 'authorize-url');
    const opener = `#!/bin/sh\nprintf '%s\\n' "$1" >>${JSON.stringify(urlFile)}\n`;
    mkdirSync(fake, { recursive: true });
    for (const n of ['xdg-open', 'open-url']) {
      writeFileSync(path.join(fake, n), opener);
      chmodSync(path.join(fake, n), 0o755);
    }
    const port = await freePort();
    const configDir = path.join(tmp, 'mcp-auth-oauth');
    const c = await stdioClient(path.join(BIN, 'mcp-remote'),
      [aasd.mcpUrl, String(port), '--transport', 'http-only'],
      clientEnv({ PATH: `${fake}:${process.env.PATH}`, BROWSER: path.join(fake, 'open-url'),
        MCP_REMOTE_CONFIG_DIR: configDir }));
    let browser;
    try {
      // initialize and tools/list need no credential: the first tool call
      // is answered 401, and mcp-remote starts OAuth and retries it.
      await c.started;
      const first = c.client.callTool({ name: 'get_usage', arguments: {} });
      first.catch(() => {});
      const authUrl = await waitFor('mcp-remote opens the authorization URL', () => {
        if (existsSync(urlFile)) return readFileSync(urlFile, 'utf8').split('\n')[0] || null;
        const m = c.stderr().match(/Please authorize this client by visiting:\s+(\S+)/);
        return m ? m[1] : null;
      }, 60000);
      const u = new URL(authUrl);
      assert.equal(u.origin + u.pathname, `${aasd.url}/oauth/authorize`);
      assert.equal(u.searchParams.get('code_challenge_method'), 'S256');
      assert.equal(new URL(u.searchParams.get('redirect_uri')).port, String(port));
      browser = await launchBrowser();
      const page = await browser.newPage();
      await page.goto(authUrl, { waitUntil: 'load' });
      assert.match(page.url(), /\/login\?next=/);
      await formFill(page, { email, password: GOOD_PASSWORD });
      await clickAndWait(page, 'main button[type=submit]');
      assert.match(page.url(), /\/oauth\/authorize\?/);
      await clickAndWait(page, '#approve');
      // mcp-remote's callback server on localhost took the code.
      assert.match(page.url(), new RegExp(`^http://(localhost|127\\.0\\.0\\.1):${port}/`));
      await closeBrowser(browser);
      browser = null;
      const usage = structured(await first, 'get_usage');
      assert.ok(usage, 'the call that started OAuth was answered');
      const tokens = await waitFor('mcp-remote stores its tokens', () => findTokens(configDir), 30000);
      assert.match(tokens.access_token, /^aas_at_/);
      await lifecycle(sdkOps(c.client), { authorization: `Bearer ${tokens.access_token}` });
    } catch (e) {
      e.message += `\n--- mcp-remote stderr ---\n${c.stderr().slice(-3000)}`;
      throw e;
    } finally {
      await closeBrowser(browser);
      await c.client.close().catch(() => {});
    }
  });

  test('the AI SDK MCP client (@ai-sdk/mcp) over HTTP with the key in headers', async () => {
    const client = await createMCPClient({
      transport: { type: 'http', url: aasd.mcpUrl, headers: keyHeader() },
    });
    try {
      const tools = await client.tools();
      let n = 0;
      await lifecycle({
        names: async () => Object.keys(tools),
        call: async (name, args) => structured(await tools[name].execute(args,
          { toolCallId: `call-${++n}`, messages: [] }), name),
      }, keyHeader());
    } finally {
      await client.close();
    }
  });

  test('LangChain MCP adapters (MultiServerMCPClient) over HTTP with the key in headers', async () => {
    const client = new MultiServerMCPClient({
      mcpServers: { aas: { transport: 'http', url: aasd.mcpUrl, headers: keyHeader() } },
      useStandardContentBlocks: false,
    });
    try {
      const tools = await client.getTools();
      const byName = new Map(tools.map((t) => [t.name.replace(/^mcp__aas__/, ''), t]));
      await lifecycle({
        names: async () => [...byName.keys()],
        call: async (name, args) => structured(await byName.get(name).invoke(args), name),
      }, keyHeader());
    } finally {
      await client.close();
    }
  });

  test('mcporter CLI with a config that sends the key in headers', async () => {
    const config = path.join(tmp, 'mcporter.json');
    writeFileSync(config, JSON.stringify({
      mcpServers: { aas: { baseUrl: aasd.mcpUrl, headers: keyHeader() } },
      imports: [],
    }));
    const mcporter = async (...args) => {
      const r = await run(path.join(BIN, 'mcporter'), ['--config', config, ...args]);
      assert.equal(r.code, 0, `mcporter ${args.join(' ')}:\n${r.stdout}\n${r.stderr}`);
      return r.stdout;
    };
    await lifecycle({
      names: async () => JSON.parse(await mcporter('list', 'aas', '--json')).tools.map((t) => t.name),
      call: async (name, args) => structured(JSON.parse(await mcporter('call', `aas.${name}`,
        '--args', JSON.stringify(args), '--output', 'json')), name),
    }, keyHeader());
  });

  test('the MCP Inspector CLI (--cli) over HTTP with --header', async () => {
    const inspector = async (...args) => {
      const r = await run(path.join(BIN, 'mcp-inspector-cli'), ['--cli', aasd.mcpUrl, '--transport', 'http',
        '--header', `x-api-key: ${account.api_key}`, ...args], { cwd: INSPECTOR_DIR });
      assert.equal(r.code, 0, `inspector ${args.join(' ')}:\n${r.stdout}\n${r.stderr}`);
      return JSON.parse(r.stdout);
    };
    await lifecycle({
      names: async () => (await inspector('--method', 'tools/list')).tools.map((t) => t.name),
      call: async (name, args) => structured(await inspector('--method', 'tools/call', '--tool-name', name,
        ...Object.entries(args).flatMap(([k, v]) => ['--tool-arg', `${k}=${v}`])), name),
    }, keyHeader());
  });
});
