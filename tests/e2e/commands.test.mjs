// Commands on a real VM: a background command followed with get_command
// (waiting for its end), kill_command ending a whole process group (checked
// in the guest with ps), run_command's output as MCP progress with the
// official SDK client (onprogress), and the same over REST as an event
// stream.
// make test: alone (it bounds how soon streamed output arrives).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startAasd, newAccount, vmEnv } from './lib/harness.mjs';

const LONG = { timeout: 300000 };
let aasd;
let alice;
let bob;
let a;   // alice's client
let b;   // bob's client
let sbx; // alice's sandbox

async function connect(key) {
  const transport = new StreamableHTTPClientTransport(new URL(aasd.mcpUrl),
    { requestInit: { headers: { 'x-api-key': key } } });
  const client = new Client({ name: 'aas-commands-e2e', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

async function call(client, name, args, opts) {
  return client.callTool({ name, arguments: args }, undefined, { timeout: 300000, ...opts });
}

async function ok(name, args, opts) {
  const r = await call(a, name, args, opts);
  assert.ok(!r.isError, `${name}: ${r.content?.[0]?.text}`);
  return r.structuredContent;
}

async function sh(command) {
  return ok('run_command', { sandbox_id: sbx, command });
}

// Events of a text/event-stream body: [{event, data}].
function events(text) {
  return text.split('\n\n').filter((b) => b.trim()).map((block) => {
    const ev = { event: 'message', data: '' };
    for (const line of block.split('\n')) {
      if (line.startsWith('event: ')) ev.event = line.slice(7);
      else if (line.startsWith('data: ')) ev.data += line.slice(6);
    }
    return ev;
  });
}

async function rest(method, path, { key = alice.api_key, json, headers = {} } = {}) {
  const r = await fetch(`${aasd.url}${path}`, {
    method,
    headers: { 'x-api-key': key, ...(json ? { 'Content-Type': 'application/json' } : {}), ...headers },
    body: json ? JSON.stringify(json) : undefined,
  });
  const text = await r.text();
  let body = null;
  try { body = JSON.parse(text); } catch { /* a stream */ }
  return { status: r.status, headers: r.headers, text, json: body };
}

before(async () => {
  aasd = await startAasd(vmEnv('commands'));
  alice = await newAccount();
  bob = await newAccount();
  a = await connect(alice.api_key);
  b = await connect(bob.api_key);
  const c = await ok('create_sandbox', { size: 'small', timeout_minutes: 20 });
  sbx = c.sandbox_id;
});

after(async () => {
  if (sbx) await call(a, 'destroy_sandbox', { sandbox_id: sbx }).catch(() => {});
  await a?.close();
  await b?.close();
  await aasd?.stop();
});

test('the tools are listed with schemas and annotations', async () => {
  const { tools } = await a.listTools();
  for (const name of ['get_command', 'kill_command']) {
    const t = tools.find((x) => x.name === name);
    assert.ok(t, name);
    assert.ok(t.title && t.annotations && t.outputSchema, name);
    assert.deepEqual(t.inputSchema.required, ['sandbox_id', 'command_id']);
  }
  const info = await ok('get_service_info', {});
  const names = info.tools.map((t) => t.name);
  assert.ok(names.includes('get_command') && names.includes('kill_command'));
  assert.equal(info.limits.max_wait_seconds, 60);
});

// A command runs in the static build of the packaged bash (it starts in a
// fifth of the time under TCG); what the command sees is the packaged bash's:
// $0, $BASH, the version, the locale (a two-byte character is one), ~user,
// arrays, regular expressions, process substitution and the exit status.
test('run_command: the static bash behaves as the packaged one, with $0 and $BASH unchanged', LONG, async () => {
  const probe = 'echo "$0|$BASH|$BASH_VERSION|$(/bin/bash -c \'echo $BASH_VERSION\')"; ' +
    'readlink /proc/$$/exe; echo ~root; y=$\'\\u00e9\'; x=(a b c); ' +
    'echo "$y|${#y}|${x[1]}|$((6*7))"; [[ sandbox =~ ^s(and) ]] && echo "${BASH_REMATCH[1]}"; ' +
    'id -un; cat <(echo substituted); exit 3';
  const r = await sh(probe);
  assert.equal(r.exit_code, 3, r.stderr);
  const v = r.stdout.split('\n');
  const [zero, bash, version, packaged] = v[0].split('|');
  assert.deepEqual([zero, bash], ['/bin/bash', '/bin/bash']);
  assert.ok(version && version === packaged, v[0]);
  assert.equal(v[1], '/usr/bin/bash-static');
  assert.deepEqual(v.slice(2), ['/root', '\u00e9|1|b|42', 'and', 'sandbox', 'substituted', '']);
});

test('get_command with wait_seconds returns when a background command ends', LONG, async () => {
  const r = await ok('run_command', { sandbox_id: sbx, command: 'sleep 30; echo done',
    background: true });
  assert.equal(r.state, 'running');
  assert.match(r.note, /get_command/);
  const first = await ok('get_command', { sandbox_id: sbx, command_id: r.command_id });
  assert.equal(first.state, 'running');
  assert.equal(first.exit_code, null);
  assert.equal(first.stdout, '');
  const t0 = Date.now();
  let g = first;
  let out = '';
  let calls = 0;
  while (g.state === 'running' && calls < 10) {
    g = await ok('get_command', { sandbox_id: sbx, command_id: r.command_id,
      stdout_offset: g.next_stdout_offset, stderr_offset: g.next_stderr_offset,
      wait_seconds: 60 });
    out += g.stdout;
    calls++;
  }
  const waited = Date.now() - t0;
  assert.equal(g.state, 'exited');
  assert.equal(g.exit_code, 0);
  assert.equal(out, 'done\n');
  assert.equal(g.stdout_bytes, 5);
  // It waited for the end instead of answering at once, and no longer.
  assert.ok(calls <= 3, `${calls} calls`);
  assert.ok(waited > 15000, `waited ${waited} ms`);
  assert.ok(waited < 60000, `waited ${waited} ms`);
  // The REST route is the same operation.
  const s = await rest('GET', `/v1/sandboxes/${sbx}/commands/${r.command_id}?stdout_offset=1`);
  assert.equal(s.status, 200, s.text);
  assert.equal(s.json.stdout, 'one\n');
  assert.equal(s.json.command, 'sleep 30; echo done');
  assert.equal(s.json.state, 'exited');
});

test('kill_command ends the whole process group; no process of it is left', LONG, async () => {
  // Two children in the command's process group, and a grandchild.
  const r = await ok('run_command', { sandbox_id: sbx, background: true,
    command: 'sleep 301 & bash -c "sleep 302" & sleep 303; wait' });
  // Its processes exist before the kill.
  let ps = '';
  for (let i = 0; i < 20; i++) {
    ps = (await sh('ps -eo pid,pgid,args | grep "[s]leep 30[123]" || true')).stdout;
    if ((ps.match(/sleep 30/g) || []).length >= 3) break;
    await new Promise((res) => setTimeout(res, 500));
  }
  assert.ok((ps.match(/sleep 30/g) || []).length >= 3, ps);
  const k = await ok('kill_command', { sandbox_id: sbx, command_id: r.command_id });
  assert.equal(k.signalled, true);
  assert.equal(k.signal, 'TERM');
  let g = await ok('get_command', { sandbox_id: sbx, command_id: r.command_id, wait_seconds: 30 });
  for (let i = 0; g.state === 'running' && i < 5; i++) {
    g = await ok('get_command', { sandbox_id: sbx, command_id: r.command_id, wait_seconds: 30 });
  }
  assert.equal(g.state, 'killed', JSON.stringify(g));
  assert.equal(g.exit_code, 128 + 15);
  // Nothing of the group is left in the guest.
  let left = '';
  for (let i = 0; i < 10; i++) {
    left = (await sh('ps -eo pid,pgid,args | grep "[s]leep 30[123]" || true')).stdout;
    if (left === '') break;
    await new Promise((res) => setTimeout(res, 500));
  }
  assert.equal(left, '', `processes left: ${left}`);
  // Again: it has ended; nothing is sent.
  const again = await ok('kill_command', { sandbox_id: sbx, command_id: r.command_id,
    signal: 'KILL' });
  assert.equal(again.signalled, false);
  assert.equal(again.state, 'killed');
  // Over REST.
  const r2 = await ok('run_command', { sandbox_id: sbx, command: 'sleep 304', background: true });
  const kr = await rest('POST', `/v1/sandboxes/${sbx}/commands/${r2.command_id}/kill`,
    { json: { signal: 'INT' } });
  assert.equal(kr.status, 200, kr.text);
  assert.equal(kr.json.signal, 'INT');
  assert.equal(kr.json.signalled, true);
});

test('another account, and ids that name nothing, are not found', LONG, async () => {
  const r = await ok('run_command', { sandbox_id: sbx, command: 'sleep 120', background: true });
  for (const name of ['get_command', 'kill_command']) {
    const x = await call(b, name, { sandbox_id: sbx, command_id: r.command_id });
    assert.equal(x.isError, true, name);
    assert.match(x.content[0].text, /not found|no sandbox/i, name);
    const y = await call(a, name, { sandbox_id: sbx, command_id: 'cmd-0123456789abcdef' });
    assert.equal(y.isError, true, name);
  }
  assert.equal((await rest('GET', `/v1/sandboxes/${sbx}/commands/${r.command_id}`,
    { key: bob.api_key })).status, 404);
  assert.equal((await rest('POST', `/v1/sandboxes/${sbx}/commands/${r.command_id}/kill`,
    { key: bob.api_key })).status, 404);
  // Bob's attempts did not stop it.
  const g = await ok('get_command', { sandbox_id: sbx, command_id: r.command_id });
  assert.equal(g.state, 'running');
  await ok('kill_command', { sandbox_id: sbx, command_id: r.command_id, signal: 'KILL' });
});

test('run_command output reaches an SDK client as progress; the result is unchanged', LONG, async () => {
  const command = 'for i in 1 2 3 4 5; do echo "line $i"; sleep 0.2; done; echo "é-err" >&2';
  const progress = [];
  const r = await ok('run_command', { sandbox_id: sbx, command },
    { onprogress: (p) => progress.push(p) });
  assert.equal(r.stdout, 'line 1\nline 2\nline 3\nline 4\nline 5\n');
  assert.equal(r.stderr, 'é-err\n');
  assert.equal(r.exit_code, 0);
  assert.ok(progress.length >= 2, JSON.stringify(progress));
  let out = '';
  let err = '';
  for (let i = 0; i < progress.length; i++) {
    const m = progress[i].message;
    if (m.startsWith('stdout: ')) out += m.slice(8);
    else if (m.startsWith('stderr: ')) err += m.slice(8);
    else assert.fail(`unexpected message ${m}`);
    if (i > 0) assert.ok(progress[i].progress > progress[i - 1].progress);
  }
  assert.equal(out, r.stdout);
  assert.equal(err, r.stderr);
  // Without a progress token the same call answers the same way.
  const plain = await ok('run_command', { sandbox_id: sbx, command });
  assert.deepEqual(Object.keys(plain).sort(), Object.keys(r).sort());
  assert.equal(plain.stdout, r.stdout);
});

test('output streams as it is printed: a line every 200 ms for 3 s, the first within 500 ms, in order', LONG, async (t) => {
  // Timed from the call, which is before the command starts: an upper
  // bound on the delay from the guest's echo to the client.
  const command = 'for ((i = 1; i <= 15; i++)); do echo "line $i"; sleep 0.2; done';
  const seen = [];
  const started = Date.now();
  const r = await ok('run_command', { sandbox_id: sbx, command },
    { onprogress: (p) => seen.push({ at: Date.now(), message: p.message }) });
  const lines = r.stdout.split('\n').slice(0, -1);
  assert.deepEqual(lines, Array.from({ length: 15 }, (_, i) => `line ${i + 1}`));
  const first = seen.find((p) => p.message.includes('line 1\n'));
  assert.ok(first, JSON.stringify(seen));
  const lag = first.at - started;
  t.diagnostic(`first line ${lag} ms after the call`);
  assert.ok(lag < 500, `the first line arrived ${lag} ms after the call`);
  // Streamed while it ran, not at the end: the progress messages spread
  // over most of the 3 s, in the order printed.
  assert.ok(seen.length >= 5, `${seen.length} progress messages`);
  assert.ok(seen[seen.length - 1].at - first.at > 2000, JSON.stringify(seen.map((p) => p.at)));
  const streamed = seen.map((p) => p.message.replace(/^stdout: /, '')).join('');
  assert.equal(streamed, r.stdout);
});

test('REST run_command as text/event-stream: output events then the plain result', LONG, async () => {
  const json = { command: 'echo one; echo two >&2; exit 3' };
  const s = await rest('POST', `/v1/sandboxes/${sbx}/commands`,
    { json, headers: { Accept: 'text/event-stream' } });
  assert.equal(s.status, 200, s.text);
  assert.match(s.headers.get('content-type'), /^text\/event-stream/);
  const evs = events(s.text);
  const last = evs[evs.length - 1];
  assert.equal(last.event, 'result', s.text);
  const result = JSON.parse(last.data);
  assert.equal(result.stdout, 'one\n');
  assert.equal(result.stderr, 'two\n');
  assert.equal(result.exit_code, 3);
  const text = (name) => evs.filter((e) => e.event === name).map((e) => JSON.parse(e.data).text).join('');
  assert.equal(text('stdout'), 'one\n');
  assert.equal(text('stderr'), 'two\n');
  // The plain route answers the same members; so does a client that takes
  // JSON as well as a stream.
  const plain = await rest('POST', `/v1/sandboxes/${sbx}/commands`, { json });
  assert.equal(plain.status, 200);
  assert.deepEqual(Object.keys(plain.json).sort(), Object.keys(result).sort());
  const both = await rest('POST', `/v1/sandboxes/${sbx}/commands`,
    { json, headers: { Accept: 'application/json, text/event-stream' } });
  assert.equal(both.status, 200);
  assert.match(both.headers.get('content-type'), /^application\/json/);
  assert.equal(both.json.stdout, 'one\n');
  // A refused call is a plain JSON error, not a stream.
  const bad = await rest('POST', `/v1/sandboxes/${sbx}/commands`,
    { json: { command: '' }, headers: { Accept: 'text/event-stream' } });
  assert.equal(bad.status, 400);
  assert.equal(bad.json.error.field, 'command');
  // A failure after the stream began is its last event.
  const gone = await rest('POST', `/v1/sandboxes/sbx-0123456789abcdef/commands`,
    { json: { command: 'true' }, headers: { Accept: 'text/event-stream' } });
  const ge = events(gone.text);
  assert.equal(ge[ge.length - 1].event, 'error', gone.text);
  assert.equal(JSON.parse(ge[ge.length - 1].data).status, 404);
});
