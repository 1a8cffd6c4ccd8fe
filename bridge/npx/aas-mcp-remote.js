#!/usr/bin/env node
// aas-mcp-remote: a local stdio MCP server that forwards every message to
// the service's /v1/mcp over Streamable HTTP, with the key from
// AAS_API_KEY. No tool logic of its own: tools, results and errors are the
// service's. Served by aasd as <origin>/mcp.tgz, so
//   AAS_API_KEY=aas_sk_... npx -y <origin>/mcp.tgz
// starts it; AAS_BASE_URL overrides the origin it was downloaded from.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');

const MAX_LINE = 64 * 1024 * 1024;
const config = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'config.json'), 'utf8'));
const key = (process.env.AAS_API_KEY || '').trim();
if (!key) {
  process.stderr.write('aas-mcp-remote: AAS_API_KEY is not set. Put your API key in it '
    + `(keys: ${config.dashboardUrl || config.baseUrl}).\n`);
  process.exit(2);
}
const base = (process.env.AAS_BASE_URL || config.baseUrl).replace(/\/+$/, '');
let endpoint;
try {
  endpoint = new URL(`${base}/v1/mcp`);
  if (!/^https?:$/.test(endpoint.protocol)) throw new Error('not http(s)');
} catch {
  process.stderr.write(`aas-mcp-remote: AAS_BASE_URL is not an http(s) URL: ${base}\n`);
  process.exit(2);
}

let session = null;
let version = null;
let initialized = null; // the initialize exchange, which later messages wait for
const pending = new Set();

function write(msg) {
  process.stdout.write(`${JSON.stringify(msg)}\n`);
}

// An answer the service could not give: an error for a request, a line
// on stderr for a notification.
function fail(msg, text) {
  if (msg && msg.id !== undefined && msg.method) {
    write({ jsonrpc: '2.0', id: msg.id, error: { code: -32603, message: text } });
  } else {
    process.stderr.write(`aas-mcp-remote: ${text}\n`);
  }
}

function deliver(msg, m) {
  if (!m || typeof m !== 'object') return;
  // A refusal before the service read the id (401, 413...) answers this request.
  if (m.id === null && msg.id !== undefined && msg.method) m.id = msg.id;
  if (msg.method === 'initialize' && m.result && m.result.protocolVersion) version = m.result.protocolVersion;
  write(m);
}

async function readSse(body, msg) {
  const dec = new TextDecoder();
  let buf = '';
  for await (const chunk of body) {
    buf += dec.decode(chunk, { stream: true });
    let end;
    while ((end = buf.search(/\r?\n\r?\n/)) >= 0) {
      const event = buf.slice(0, end);
      buf = buf.slice(end).replace(/^\r?\n\r?\n/, '');
      const data = event.split(/\r?\n/).filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, '')).join('\n');
      if (data) {
        try { deliver(msg, JSON.parse(data)); } catch { /* not JSON: not ours to pass on */ }
      }
    }
  }
}

async function post(msg) {
  const headers = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'x-api-key': key,
  };
  if (session) headers['mcp-session-id'] = session;
  if (version) headers['mcp-protocol-version'] = version;
  let res;
  try {
    res = await fetch(endpoint, { method: 'POST', headers, body: JSON.stringify(msg) });
  } catch (e) {
    fail(msg, `cannot reach ${endpoint.origin}: ${(e.cause && e.cause.code) || e.message}`);
    return;
  }
  const sid = res.headers.get('mcp-session-id');
  if (sid) session = sid;
  if (res.status === 202) return;
  const type = res.headers.get('content-type') || '';
  if (type.startsWith('text/event-stream') && res.body) {
    await readSse(res.body, msg);
    return;
  }
  const text = await res.text();
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    fail(msg, `HTTP ${res.status} from ${endpoint.origin}: ${text.slice(0, 300)}`);
    return;
  }
  for (const m of Array.isArray(body) ? body : [body]) deliver(msg, m);
}

function handle(line) {
  if (!line.trim()) return;
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    write({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'parse error: not JSON' } });
    return;
  }
  let p;
  if (msg && msg.method === 'initialize') {
    p = post(msg);
    initialized = p;
  } else {
    p = (initialized || Promise.resolve()).then(() => post(msg));
  }
  pending.add(p);
  p.finally(() => pending.delete(p));
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  if (line.length > MAX_LINE) {
    fail(null, 'a message over 64 MiB was dropped');
    return;
  }
  handle(line);
});
rl.on('close', async () => {
  await Promise.allSettled([...pending]);
  if (session) {
    await fetch(endpoint, {
      method: 'DELETE',
      headers: { 'x-api-key': key, 'mcp-session-id': session, ...(version ? { 'mcp-protocol-version': version } : {}) },
    }).catch(() => {});
  }
  process.exit(0);
});
