// GET /metrics: a strict Prometheus text-format (0.0.4) check of what aasd
// serves, promtool's when it is installed, and the counters moving under
// MCP and HTTP traffic and one VM's create and destroy.
//
// promtool (AAS_PROMTOOL, else promtool on the PATH) is optional: Debian ships
// it in the 19 MB package prometheus, whose installation also starts a
// Prometheus server. `apt-get download prometheus` and `dpkg-deb -x` on the
// .deb give the binary alone (usr/bin/promtool).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  startAasd, newAccount, vmEnv, post, openSession, PROTOCOL,
} from './lib/harness.mjs';

const run = promisify(execFile);

// ---- a strict parser of the text exposition format, version 0.0.4 ----

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

function parseValue(s, where) {
  if (s === '+Inf') return Infinity;
  if (s === '-Inf') return -Infinity;
  if (s === 'NaN') return NaN;
  assert.match(s, /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/, `${where}: bad value ${s}`);
  return Number(s);
}

// {a="x",b="y"} -> [['a','x'],['b','y']]; only \\, \" and \n are escapes.
function parseLabels(s, where) {
  const out = [];
  let i = 0;
  while (i < s.length) {
    const eq = s.indexOf('=', i);
    assert.ok(eq > i, `${where}: label without =`);
    const name = s.slice(i, eq);
    assert.match(name, LABEL, `${where}: bad label name ${name}`);
    assert.ok(!name.startsWith('__'), `${where}: reserved label ${name}`);
    assert.equal(s[eq + 1], '"', `${where}: label value not quoted`);
    let j = eq + 2;
    let value = '';
    for (;;) {
      assert.ok(j < s.length, `${where}: unterminated label value`);
      const c = s[j];
      if (c === '"') break;
      if (c === '\\') {
        const n = s[j + 1];
        assert.ok(n === '\\' || n === '"' || n === 'n', `${where}: bad escape \\${n}`);
        value += n === 'n' ? '\n' : n;
        j += 2;
      } else {
        assert.notEqual(c, '\n', `${where}: raw newline in a label value`);
        value += c;
        j += 1;
      }
    }
    assert.ok(!out.some(([n]) => n === name), `${where}: label ${name} twice`);
    out.push([name, value]);
    j += 1;
    if (j === s.length) break;
    assert.equal(s[j], ',', `${where}: expected , between labels`);
    i = j + 1;
  }
  return out;
}

function seriesKey(name, labels) {
  const sorted = [...labels].sort(([a], [b]) => a.localeCompare(b));
  return `${name}{${sorted.map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(',')}}`;
}

// Returns { families: Map(name -> {type, help, samples}), values: Map(key -> number) }.
function parseExposition(text) {
  assert.ok(text.endsWith('\n'), 'exposition ends with a newline');
  const families = new Map();
  const values = new Map();
  const closed = new Set();
  let current = null;
  const lines = text.slice(0, -1).split('\n');
  lines.forEach((line, n) => {
    const where = `line ${n + 1} (${line.slice(0, 80)})`;
    assert.notEqual(line, '', `${where}: empty line`);
    const meta = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
    if (meta) {
      const [, kind, name, rest] = meta;
      assert.match(name, NAME, `${where}: bad metric name`);
      assert.ok(!closed.has(name) || current === name, `${where}: ${name} announced again`);
      if (current && current !== name) closed.add(current);
      current = name;
      const f = families.get(name) ?? { type: null, help: null, samples: [] };
      families.set(name, f);
      assert.equal(f.samples.length, 0, `${where}: ${kind} after samples`);
      if (kind === 'HELP') {
        assert.equal(f.help, null, `${where}: second HELP`);
        assert.ok(!/\\[^\\n]/.test(rest), `${where}: bad escape in HELP`);
        f.help = rest;
      } else {
        assert.equal(f.type, null, `${where}: second TYPE`);
        assert.ok(TYPES.has(rest), `${where}: bad type ${rest}`);
        f.type = rest;
      }
      return;
    }
    assert.ok(!line.startsWith('#'), `${where}: comment lines are HELP or TYPE here`);
    const m = /^([^{\s]+)(?:\{(.*)\})? (\S+)(?: (-?\d+))?$/.exec(line);
    assert.ok(m, `${where}: not a sample line`);
    const [, name, labelText, valueText] = m;
    assert.match(name, NAME, `${where}: bad metric name`);
    const labels = labelText ? parseLabels(labelText, where) : [];
    const value = parseValue(valueText, where);
    // The sample's family: the name itself or, for a histogram, its base.
    let fam = name;
    const suffix = /^(.*)_(bucket|sum|count)$/.exec(name);
    if (!families.has(name) && suffix && families.get(suffix[1])?.type === 'histogram') {
      fam = suffix[1];
    }
    const f = families.get(fam);
    assert.ok(f && f.type, `${where}: sample of ${fam} without a TYPE before it`);
    assert.equal(fam, current, `${where}: samples of ${fam} not grouped under its TYPE`);
    if (f.type === 'histogram') {
      assert.ok(name !== fam, `${where}: histogram sample without _bucket/_sum/_count`);
      if (name.endsWith('_bucket')) assert.ok(labels.some(([k]) => k === 'le'), `${where}: bucket without le`);
    }
    if (f.type === 'counter') {
      assert.ok(value >= 0, `${where}: negative counter`);
    }
    const key = seriesKey(name, labels);
    assert.ok(!values.has(key), `${where}: duplicate series ${key}`);
    values.set(key, value);
    f.samples.push({ name, labels, value });
  });
  for (const [name, f] of families) {
    assert.ok(f.type, `${name}: no TYPE`);
    assert.ok(f.help, `${name}: no HELP`);
    if (f.type === 'histogram') checkHistogram(name, f);
  }
  return { families, values };
}

// Buckets ascend by le, counts are cumulative, the last is +Inf and equals
// _count; _sum is there, for every label set.
function checkHistogram(name, f) {
  const groups = new Map();
  for (const s of f.samples) {
    const rest = s.labels.filter(([k]) => k !== 'le');
    const key = seriesKey('', rest);
    const g = groups.get(key) ?? { buckets: [], sum: null, count: null };
    groups.set(key, g);
    if (s.name === `${name}_bucket`) {
      g.buckets.push({ le: parseValue(s.labels.find(([k]) => k === 'le')[1], name), v: s.value });
    } else if (s.name === `${name}_sum`) {
      g.sum = s.value;
    } else if (s.name === `${name}_count`) {
      g.count = s.value;
    }
  }
  for (const [key, g] of groups) {
    const where = `${name}${key}`;
    assert.ok(g.buckets.length > 0, `${where}: no buckets`);
    for (let i = 1; i < g.buckets.length; i++) {
      assert.ok(g.buckets[i].le > g.buckets[i - 1].le, `${where}: le not ascending`);
      assert.ok(g.buckets[i].v >= g.buckets[i - 1].v, `${where}: buckets not cumulative`);
    }
    assert.equal(g.buckets.at(-1).le, Infinity, `${where}: last bucket is not +Inf`);
    assert.notEqual(g.sum, null, `${where}: no _sum`);
    assert.notEqual(g.count, null, `${where}: no _count`);
    assert.equal(g.count, g.buckets.at(-1).v, `${where}: _count differs from +Inf`);
  }
}

test('the parser itself refuses malformed expositions', () => {
  const ok = '# HELP a_total x\n# TYPE a_total counter\na_total{l="v"} 1\n';
  parseExposition(ok);
  const bad = [
    'a_total 1\n',                                                   // no TYPE
    '# HELP a x\n# TYPE a gauge\na{l="v"} 1\na{l="v"} 2\n',          // duplicate
    '# HELP a x\n# TYPE a gauge\na{l="v\\q"} 1\n',                   // bad escape
    '# HELP a x\n# TYPE a gauge\na{1l="v"} 1\n',                     // label name
    '# HELP h x\n# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n',
    '# HELP h x\n# TYPE h histogram\nh_bucket{le="1"} 1\nh_sum 1\nh_count 1\n',
    '# HELP h x\n# TYPE h histogram\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 2\n',
    '# HELP h x\n# TYPE h histogram\nh_bucket{le="+Inf"} 1\nh_count 1\n',
    '# HELP a x\n# TYPE a gauge\na 1',                               // no final newline
    '# HELP a x\n# TYPE a gauge\n# HELP b x\n# TYPE b gauge\na 1\n', // not grouped
  ];
  for (const text of bad) assert.throws(() => parseExposition(text), undefined, text);
});

// ---- against the daemon ----

let aasd;
let account;

async function scrape(srv = aasd, headers = {}) {
  const r = await fetch(`${srv.url}/metrics`, { headers });
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
  const text = await r.text();
  return { text, ...parseExposition(text) };
}

function v(values, key) {
  return values.get(key) ?? 0;
}

async function connect(key) {
  const transport = new StreamableHTTPClientTransport(new URL(aasd.mcpUrl),
    { requestInit: { headers: { 'x-api-key': key } } });
  const client = new Client({ name: 'aas-metrics-e2e', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

before(async () => {
  aasd = await startAasd(vmEnv('metrics'));
  account = await newAccount();
});
after(async () => { await aasd?.stop(); });

test('/metrics is well-formed text format 0.0.4 with the expected families', async () => {
  const { families, values, text } = await scrape();
  for (const [name, type] of [
    ['aas_build_info', 'gauge'],
    ['aas_http_requests_total', 'counter'],
    ['aas_mcp_messages_total', 'counter'],
    ['aas_tool_calls_total', 'counter'],
    ['aas_tool_call_duration_seconds', 'histogram'],
    ['aas_sandbox_boots_total', 'counter'],
    ['aas_sandbox_boot_duration_seconds', 'histogram'],
    ['aas_guest_agent_errors_total', 'counter'],
    ['aas_credits_charged_microusd_total', 'counter'],
    ['aas_credits_refunded_microusd_total', 'counter'],
    ['aas_database_up', 'gauge'],
    ['aas_sandboxes', 'gauge'],
    ['aas_warm_pool_ready', 'gauge'],
    ['aas_warm_pool_target', 'gauge'],
  ]) {
    assert.equal(families.get(name)?.type, type, `${name} is a ${type}`);
  }
  assert.equal(v(values, 'aas_database_up{}'), 1);
  assert.equal(v(values, 'aas_build_info{version="0.2.0"}'), 1);
  // No ids, keys or accounts in any label.
  for (const key of values.keys()) {
    assert.doesNotMatch(key, /sbx-[a-z0-9]{16}|aas_sk_|[0-9a-f]{8}-[0-9a-f]{4}-|account|api_key|session/i, key);
  }
  assert.ok(!text.includes(account.api_key));
});

test('HTTP, MCP and tool counters move with traffic', async () => {
  const before = (await scrape()).values;
  const sid = await openSession(aasd.mcpUrl);
  const h = { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL };
  const list = await post(aasd.mcpUrl, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, h);
  assert.equal(list.status, 200);
  // A refused call: get_usage needs a credential (401 before it runs).
  const noKey = await post(aasd.mcpUrl, { jsonrpc: '2.0', id: 3, method: 'tools/call',
    params: { name: 'get_usage', arguments: {} } }, h);
  assert.equal(noKey.status, 401);
  // A tool that does not exist (a JSON-RPC error).
  const unknown = await post(aasd.mcpUrl, { jsonrpc: '2.0', id: 5, method: 'tools/call',
    params: { name: 'make_coffee', arguments: {} } }, h);
  assert.equal(unknown.json.error.code, -32602);
  // get_service_info takes the precomputed path.
  const info = await post(aasd.mcpUrl, { jsonrpc: '2.0', id: 6, method: 'tools/call',
    params: { name: 'get_service_info', arguments: {} } }, h);
  assert.equal(info.json.result.isError, undefined);
  // Bad arguments, with a key (last: the key binds the anonymous session).
  const bad = await post(aasd.mcpUrl, { jsonrpc: '2.0', id: 4, method: 'tools/call',
    params: { name: 'get_sandbox', arguments: { sandbox_id: 7 } } },
  { ...h, 'x-api-key': account.api_key });
  assert.equal(bad.json.result.isError, true);
  assert.equal((await fetch(`${aasd.url}/healthz`)).status, 200);
  assert.equal((await fetch(`${aasd.url}/no/such/sbx-0123456789abcdef`)).status, 404);

  const after = (await scrape()).values;
  const d = (key) => v(after, key) - v(before, key);
  assert.ok(d('aas_http_requests_total{route="/v1/mcp",status="200"}') >= 5);
  assert.equal(d('aas_http_requests_total{route="/v1/mcp",status="401"}'), 1);
  assert.equal(d('aas_http_requests_total{route="/v1/mcp",status="202"}'), 1); // initialized
  assert.equal(d('aas_http_requests_total{route="/healthz",status="200"}'), 1);
  assert.equal(d('aas_http_requests_total{route="unmatched",status="404"}'), 1);
  assert.ok(d('aas_http_requests_total{route="/metrics",status="200"}') >= 1);
  assert.equal(d('aas_mcp_messages_total{method="initialize"}'), 1);
  assert.equal(d('aas_mcp_messages_total{method="notifications/initialized"}'), 1);
  assert.equal(d('aas_mcp_messages_total{method="tools/list"}'), 1);
  assert.equal(d('aas_mcp_messages_total{method="tools/call"}'), 3);
  assert.equal(d('aas_tool_calls_total{result="invalid_argument",tool="get_sandbox"}'), 1);
  assert.equal(d('aas_tool_calls_total{result="invalid_argument",tool="other"}'), 1);
  assert.equal(d('aas_tool_calls_total{result="ok",tool="get_service_info"}'), 1);
  assert.equal(d('aas_tool_call_duration_seconds_count{tool="get_service_info"}'), 1);
  // Raw paths never become labels.
  for (const key of after.keys()) assert.ok(!key.includes('/no/such'), key);
});

test('one VM: the boot histogram and the charged and refunded credit move', async () => {
  const before = (await scrape()).values;
  const c = await connect(account.api_key);
  const created = await c.callTool({ name: 'create_sandbox',
    arguments: { size: 'small', timeout_minutes: 5 } }, undefined, { timeout: 300000 });
  assert.ok(!created.isError, created.content?.[0]?.text);
  const id = created.structuredContent.sandbox_id;
  const during = (await scrape()).values;
  assert.ok(v(during, 'aas_sandboxes{state="running"}') >= 1);
  const extended = await c.callTool({ name: 'extend_sandbox',
    arguments: { sandbox_id: id, minutes: 1 } });
  assert.ok(!extended.isError, extended.content?.[0]?.text);
  const destroyed = await c.callTool({ name: 'destroy_sandbox', arguments: { sandbox_id: id } },
    undefined, { timeout: 300000 });
  assert.ok(!destroyed.isError, destroyed.content?.[0]?.text);
  await c.close();
  const s = destroyed.structuredContent;

  const { values: after, text } = await scrape();
  const d = (key) => v(after, key) - v(before, key);
  assert.equal(d('aas_sandbox_boots_total{result="ok"}'), 1);
  assert.equal(d('aas_sandbox_boot_duration_seconds_count{}'), 1);
  assert.ok(d('aas_sandbox_boot_duration_seconds_sum{}') > 0.1);
  assert.equal(d('aas_sandbox_boot_duration_seconds_bucket{le="+Inf"}'), 1);
  assert.equal(d('aas_credits_charged_microusd_total{}'), 5 * 500 + 500);   // create + extend
  assert.equal(d('aas_credits_refunded_microusd_total{}'), s.refunded);
  assert.ok(s.refunded > 0);
  assert.equal(d('aas_tool_calls_total{result="ok",tool="create_sandbox"}'), 1);
  assert.equal(d('aas_tool_calls_total{result="ok",tool="destroy_sandbox"}'), 1);
  assert.equal(d('aas_tool_call_duration_seconds_count{tool="create_sandbox"}'), 1);
  assert.ok(!text.includes(id), 'no sandbox id in the exposition');
  // The destroy's teardown runs after its answer: 0 or 1 of them now.
  assert.ok(after.has('aas_sandbox_teardowns{}'), 'the teardown gauge is exposed');
  assert.ok(v(after, 'aas_sandbox_teardowns{}') <= 1);
});

test('promtool accepts the exposition after that traffic (when promtool is installed)', async (t) => {
  const promtool = process.env.AAS_PROMTOOL || 'promtool';
  try {
    await run(promtool, ['--version']);
  } catch {
    t.skip('promtool not installed (Debian package prometheus)');
    return;
  }
  const { text } = await scrape();
  const child = execFile(promtool, ['check', 'metrics']);
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  child.stdin.end(text);
  const code = await new Promise((resolve) => child.on('exit', resolve));
  assert.equal(code, 0, out);
});

test('AAS_METRICS_TOKEN guards /metrics with a Bearer token', async () => {
  const token = 'metrics-token-for-the-e2e-test';
  const srv = await startAasd({ AAS_METRICS_TOKEN: token });
  try {
    const none = await fetch(`${srv.url}/metrics`);
    assert.equal(none.status, 401);
    assert.match(none.headers.get('www-authenticate'), /^Bearer /);
    const wrong = await fetch(`${srv.url}/metrics`, { headers: { Authorization: `Bearer ${token}x` } });
    assert.equal(wrong.status, 401);
    const apiKey = await fetch(`${srv.url}/metrics`, { headers: { 'x-api-key': token } });
    assert.equal(apiKey.status, 401);
    await scrape(srv, { Authorization: `Bearer ${token}` });
    const post405 = await fetch(`${srv.url}/metrics`, { method: 'POST',
      headers: { Authorization: `Bearer ${token}` } });
    assert.equal(post405.status, 405);
    assert.ok(!srv.log().includes(token), 'the token is never logged');
  } finally {
    await srv.stop();
  }
});
