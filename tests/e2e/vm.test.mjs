// Real VMs through /v1/mcp with the official SDK client (TCG here).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  startAasd, newAccount, vmEnv, STATE, post, openSession, sseMessages, PROTOCOL, sleep, waitFor, DB_URL,
} from './lib/harness.mjs';

const run = promisify(execFile);
let aasd;
let alice;
let bob;
let a;       // alice's client
let b;       // bob's client
let sbx;     // alice's sandbox id

async function connect(key) {
  const transport = new StreamableHTTPClientTransport(new URL(aasd.mcpUrl),
    { requestInit: { headers: { 'x-api-key': key } } });
  const client = new Client({ name: 'aas-vm-e2e', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

async function call(client, name, args, opts) {
  return client.callTool({ name, arguments: args }, undefined, { timeout: 300000, ...opts });
}

async function sh(command, extra = {}) {
  const r = await call(a, 'run_command', { sandbox_id: sbx, command, ...extra });
  assert.ok(!r.isError, r.content?.[0]?.text);
  return r.structuredContent;
}

function qemuRunning(id) {
  return run('pgrep', ['-f', `${STATE}/vms/${id}/disk.qcow2`]).then(() => true, () => false);
}

before(async () => {
  aasd = await startAasd(vmEnv('vm'));
  alice = await newAccount();
  bob = await newAccount();
  a = await connect(alice.api_key);
  b = await connect(bob.api_key);
});

after(async () => {
  await a?.close();
  await b?.close();
  await aasd?.stop();
});

test('create_sandbox boots a VM and reports progress', async () => {
  const progress = [];
  const r = await call(a, 'create_sandbox', { size: 'small', timeout_minutes: 30, name: 'e2e' },
    { onprogress: (p) => progress.push(p) });
  assert.ok(!r.isError, r.content?.[0]?.text);
  const s = r.structuredContent;
  sbx = s.sandbox_id;
  assert.match(sbx, /^sbx-[a-z0-9]{16}$/);
  assert.equal(s.state, 'running');
  assert.equal(s.accelerator, 'tcg');
  assert.equal(s.size, 'small');
  assert.ok(s.expires_at > s.ready_at);
  assert.ok(progress.length >= 3, `progress: ${JSON.stringify(progress)}`);
  assert.ok(progress.every((p, i) => i === 0 || p.progress > progress[i - 1].progress));
  assert.ok(await qemuRunning(sbx));
});

test('commands run as the unprivileged user sandbox, without sudo', async () => {
  const id = await sh('id -un; id -u');
  assert.equal(id.stdout, 'sandbox\n1000\n');
  assert.equal(id.exit_code, 0);
  const sudo = await sh('sudo true');
  assert.notEqual(sudo.exit_code, 0);
  const kern = await sh('uname -r; cat /proc/1/comm');
  assert.match(kern.stdout, /cloud-amd64/);
});

test('exit codes and stderr come back separately', async () => {
  const r = await sh('echo out; echo err >&2; exit 7');
  assert.equal(r.stdout, 'out\n');
  assert.equal(r.stderr, 'err\n');
  assert.equal(r.exit_code, 7);
  assert.equal(r.state, 'exited');
});

test('cwd, env and stdin work', async () => {
  const r = await sh('pwd; echo "$GREETING"; cat; echo', {
    cwd: '/tmp', env: { GREETING: 'hello "world" $x' }, stdin: 'line1\nline2',
  });
  assert.equal(r.stdout, '/tmp\nhello "world" $x\nline1\nline2\n');
  const bad = await sh('true', { cwd: '/nonexistent' });
  assert.equal(bad.exit_code, 126);
  assert.match(bad.stderr, /nonexistent/);
});

test('a timed-out command comes back as timed out and its processes are gone', async () => {
  const t0 = Date.now();
  const r = await sh('sleep 100 & sleep 100', { timeout_seconds: 2 });
  assert.ok(Date.now() - t0 < 30000);
  assert.equal(r.state, 'timed_out');
  assert.equal(r.timed_out, true);
  const left = await sh('pgrep -x sleep || echo none');
  assert.equal(left.stdout.trim(), 'none');
});

test('a 5 MiB random binary survives write and read (SHA-256)', async () => {
  const data = randomBytes(5 * 1024 * 1024);
  const w = await call(a, 'write_file', { sandbox_id: sbx, path: 'bin/blob.dat',
    content_base64: data.toString('base64'), mode: '0600' });
  assert.ok(!w.isError, w.content?.[0]?.text);
  assert.equal(w.structuredContent.bytes_written, data.length);
  const parts = [];
  let offset = 0;
  for (;;) {
    const r = await call(a, 'read_file', { sandbox_id: sbx, path: '/home/sandbox/bin/blob.dat',
      offset, length: 4 * 1024 * 1024, encoding: 'base64' });
    assert.ok(!r.isError, r.content?.[0]?.text);
    assert.equal(r.structuredContent.total_size, data.length);
    parts.push(Buffer.from(r.structuredContent.content, 'base64'));
    offset += r.structuredContent.length;
    if (r.structuredContent.eof) break;
  }
  const back = Buffer.concat(parts);
  assert.equal(createHash('sha256').update(back).digest('hex'),
    createHash('sha256').update(data).digest('hex'));
  const st = await sh('stat -c "%U %a %s" bin/blob.dat');
  assert.equal(st.stdout.trim(), `sandbox 600 ${data.length}`);
});

test('text with quotes and newlines is written without a shell', async () => {
  const text = 'a \'quoted\' "text"\n$(not run) `nor this`\n\ttab\n';
  const w = await call(a, 'write_file', { sandbox_id: sbx, path: 'q.txt', content: text });
  assert.ok(!w.isError, w.content?.[0]?.text);
  const r = await call(a, 'read_file', { sandbox_id: sbx, path: 'q.txt' });
  assert.equal(r.structuredContent.content, text);
  const denied = await call(a, 'write_file', { sandbox_id: sbx, path: '/etc/passwd', content: 'x' });
  assert.equal(denied.isError, true);
  assert.match(denied.content[0].text, /denied/i);
});

test('50 MiB of output is truncated as documented and the VM keeps working', async () => {
  const r = await sh('head -c 52428800 /dev/zero | tr "\\0" a', { timeout_seconds: 300 });
  assert.equal(r.stdout_truncated, true);
  assert.equal(r.stdout_bytes, 52428800);
  assert.equal(r.stdout.length, 262144);
  assert.match(r.stdout_path, /^\/var\/lib\/aas\/cmd\/cmd-[a-z0-9]{16}\.out$/);
  const next = await sh('echo still alive');
  assert.equal(next.stdout, 'still alive\n');
});

test("a background command's log is readable while it runs, its exit code after", async () => {
  const r = await call(a, 'run_command', { sandbox_id: sbx, background: true,
    command: 'for i in 1 2 3 4; do echo tick$i; sleep 1; done; exit 3' });
  const bg = r.structuredContent;
  assert.equal(bg.state, 'running');
  assert.match(bg.command_id, /^cmd-/);
  await sleep(1500);
  const mid = await call(a, 'read_file', { sandbox_id: sbx, path: bg.stdout_path });
  assert.match(mid.structuredContent.content, /tick1/);
  let cmd;
  for (let i = 0; i < 40; i++) {
    const g = await call(a, 'get_sandbox', { sandbox_id: sbx });
    cmd = g.structuredContent.commands.find((c) => c.command_id === bg.command_id);
    if (cmd.state !== 'running') break;
    await sleep(500);
  }
  assert.equal(cmd.state, 'exited');
  assert.equal(cmd.exit_code, 3);
  const done = await call(a, 'read_file', { sandbox_id: sbx, path: bg.stdout_path });
  assert.equal(done.structuredContent.content, 'tick1\ntick2\ntick3\ntick4\n');
});

test('list_files shows a tree with types, sizes and modes', async () => {
  await sh('mkdir -p tree/a/b && echo hi > tree/a/f.txt && ln -s f.txt tree/a/link && chmod 640 tree/a/f.txt');
  const r = await call(a, 'list_files', { sandbox_id: sbx, path: 'tree', depth: 5 });
  const byPath = Object.fromEntries(r.structuredContent.entries.map((x) => [x.path, x]));
  assert.equal(byPath['/home/sandbox/tree/a'].type, 'directory');
  assert.equal(byPath['/home/sandbox/tree/a/b'].type, 'directory');
  assert.equal(byPath['/home/sandbox/tree/a/f.txt'].size, 3);
  assert.equal(byPath['/home/sandbox/tree/a/f.txt'].mode, '0640');
  assert.equal(byPath['/home/sandbox/tree/a/link'].type, 'symlink');
  assert.equal(r.structuredContent.truncated, false);
  const lim = await call(a, 'list_files', { sandbox_id: sbx, path: 'tree', depth: 5, limit: 2 });
  assert.equal(lim.structuredContent.entries.length, 2);
  assert.equal(lim.structuredContent.truncated, true);
});

test('get_sandbox and list_sandboxes describe it', async () => {
  const g = await call(a, 'get_sandbox', { sandbox_id: sbx });
  assert.equal(g.structuredContent.state, 'running');
  assert.ok(g.structuredContent.usage.cpu_time_ms > 0);
  assert.ok(g.structuredContent.commands.length > 0);
  const l = await call(a, 'list_sandboxes', { state: 'live' });
  assert.deepEqual(l.structuredContent.sandboxes.map((s) => s.sandbox_id), [sbx]);
});

test("another account's sandbox is not found on every tool", async () => {
  const id = { sandbox_id: sbx };
  const calls = [
    ['run_command', { ...id, command: 'true' }],
    ['write_file', { ...id, path: 'x', content: 'x' }],
    ['read_file', { ...id, path: 'q.txt' }],
    ['list_files', { ...id }],
    ['get_sandbox', { ...id }],
    ['destroy_sandbox', { ...id }],
  ];
  for (const [name, args] of calls) {
    const r = await call(b, name, args);
    assert.equal(r.isError, true, name);
    assert.match(r.content[0].text, /not_found/, name);
  }
  const none = await call(b, 'get_sandbox', { sandbox_id: 'sbx-0000000000000000' });
  assert.equal(none.content[0].text.replace(/sbx-[a-z0-9]+/, 'X'),
    (await call(b, 'get_sandbox', id)).content[0].text.replace(/sbx-[a-z0-9]+/, 'X'));
  const l = await call(b, 'list_sandboxes', {});
  assert.equal(l.structuredContent.sandboxes.length, 0);
  assert.ok(await qemuRunning(sbx), 'still running');
});

test('bad input is a clear isError and changes nothing', async () => {
  const cases = [
    ['run_command', { sandbox_id: sbx }, /command: required/],
    ['run_command', { sandbox_id: sbx, command: ['ls'] }, /command: must be string/],
    ['read_file', { sandbox_id: sbx, path: 'a\u0000b' }, /NUL/],
    ['read_file', { sandbox_id: sbx, path: 'q.txt', offset: -5 }, /offset: must be at least 0/],
    ['write_file', { sandbox_id: sbx, path: 'big', content: 'x'.repeat(8388609) }, /content: must be at most/],
    ['write_file', { sandbox_id: sbx, path: 'both', content: 'x', content_base64: 'eA==' }, /exactly one/],
    ['write_file', { sandbox_id: sbx, path: 'b64', content_base64: '!!!' }, /not valid base64/],
    ['create_sandbox', { size: 'gigantic' }, /size: must be one of/],
    ['get_sandbox', { sandbox_id: 'sbx-TOO-SHORT' }, /sandbox_id: does not match/],
    ['run_command', { sandbox_id: sbx, command: 'true', max_output_bytes: 99999999 }, /max_output_bytes: must be at most 4194304/],
  ];
  for (const [name, args, re] of cases) {
    const r = await call(a, name, args);
    assert.equal(r.isError, true, `${name} ${JSON.stringify(args).slice(0, 80)}`);
    assert.match(r.content[0].text, re);
  }
  const ls = await sh('ls big both b64 2>&1; true');
  assert.match(ls.stdout, /No such file/);
  const l = await call(a, 'list_sandboxes', { state: 'live' });
  assert.equal(l.structuredContent.sandboxes.length, 1, 'no sandbox was created');
});

test('notifications/cancelled stops a running command', async () => {
  const sid = await openSession(aasd.mcpUrl, { 'x-api-key': alice.api_key });
  const H = { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL, 'x-api-key': alice.api_key };
  const pending = post(aasd.mcpUrl, { jsonrpc: '2.0', id: 42, method: 'tools/call',
    params: { name: 'run_command', arguments: { sandbox_id: sbx, command: 'sleep 120' },
      _meta: { progressToken: 'c1' } } }, H);
  // Cancelled once the command runs in the guest.
  await waitFor('the command to run', async () =>
    (await sh('pgrep -fx "sleep 120" >/dev/null && echo yes || true')).stdout === 'yes\n', 60000);
  const n = await post(aasd.mcpUrl, { jsonrpc: '2.0', method: 'notifications/cancelled',
    params: { requestId: 42, reason: 'test' } }, H);
  assert.equal(n.status, 202);
  const r = await pending;
  assert.ok(!sseMessages(r.text).some((m) => m.id === 42), 'no result after cancel');
  const left = await sh('sleep 1; pgrep -x sleep || echo none');
  assert.equal(left.stdout.trim(), 'none');
});

test('destroy removes the domain and the overlay, and is idempotent', async () => {
  const disk = `${STATE}/vms/${sbx}/disk.qcow2`;
  assert.ok(existsSync(disk));
  const d = await call(a, 'destroy_sandbox', { sandbox_id: sbx });
  assert.ok(!d.isError, d.content?.[0]?.text);
  assert.equal(d.structuredContent.state, 'destroyed');
  // The answer comes once the sandbox is out of reach and settled; its VM
  // and overlay go right after, in the background.
  for (let i = 0; i < 150 && (existsSync(disk) || await qemuRunning(sbx)); i++) await sleep(200);
  assert.ok(!existsSync(disk), 'overlay deleted');
  assert.equal(await qemuRunning(sbx), false, 'domain gone');
  const again = await call(a, 'destroy_sandbox', { sandbox_id: sbx });
  assert.equal(again.structuredContent.state, 'destroyed');
  const r = await call(a, 'run_command', { sandbox_id: sbx, command: 'true' });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /destroyed/);
});
