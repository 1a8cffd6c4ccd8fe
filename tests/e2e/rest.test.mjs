// The REST API under /v1 over real HTTP (curl), against aasd with VMs:
// every route, raw binary files, errors, and the OpenAPI document against
// the routes the server answers. One sandbox serves most checks.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startAasd, newAccount, vmEnv, openSession, post, PROTOCOL } from './lib/harness.mjs';

const execFileP = promisify(execFile);
const BODY_LIMIT = 65536;             // AAS_MAX_BODY_BYTES of this aasd
const UPLOAD_SIZE = 8 * 1024 * 1024;  // a file larger than any JSON body
const FILE_LIMIT = 4 * 1024 * 1024 * 1024; // AAS_MAX_FILE_BYTES by default
const NO_SBX = 'sbx-0000000000000000';
const NO_CMD = 'cmd-0000000000000000';

let aasd;
let alice;
let bob;
let tmp;
let sbx;          // alice's sandbox
let n = 0;

// One request with curl. Returns {status, headers (lower-case names), body
// (Buffer), json}.
async function curl(method, urlPath, opts = {}) {
  const id = n++;
  const out = path.join(tmp, `out-${id}`);
  const hdr = path.join(tmp, `hdr-${id}`);
  const args = ['-sS', '-X', method, '-o', out, '-D', hdr, '-w', '%{http_code}',
    '--max-time', '600'];
  if (opts.key) args.push('-H', `x-api-key: ${opts.key}`);
  if (opts.bearer) args.push('-H', `Authorization: Bearer ${opts.bearer}`);
  for (const [k, v] of Object.entries(opts.headers || {})) args.push('-H', `${k}: ${v}`);
  if (opts.json !== undefined) {
    const text = typeof opts.json === 'string' ? opts.json : JSON.stringify(opts.json);
    const f = path.join(tmp, `req-${id}`);
    writeFileSync(f, text);
    args.push('-H', 'Content-Type: application/json', '--data-binary', `@${f}`);
  }
  if (opts.file) {
    args.push('-H', 'Content-Type: application/octet-stream', '--data-binary', `@${opts.file}`);
  }
  args.push(`${aasd.url}${urlPath}`);
  const { stdout } = await execFileP('curl', args);
  const body = existsSync(out) ? readFileSync(out) : Buffer.alloc(0);
  // The last header block (after any "100 Continue").
  const blocks = readFileSync(hdr, 'latin1').split('\r\n\r\n').filter((b) => b.trim());
  const headers = {};
  for (const line of blocks[blocks.length - 1].split('\r\n').slice(1)) {
    const i = line.indexOf(':');
    if (i > 0) headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
  }
  rmSync(out, { force: true });
  rmSync(hdr, { force: true });
  let json = null;
  try { json = JSON.parse(body.toString('utf8')); } catch { /* raw */ }
  return { status: Number(stdout), headers, body, json };
}

function tmpFile(name, data) {
  const f = path.join(tmp, name);
  writeFileSync(f, data);
  return f;
}

function sha(buf) {
  return createHash('sha256').update(buf).digest('hex');
}

function expectError(r, status, code, field) {
  assert.equal(r.status, status, `${r.status} ${r.body}`);
  assert.equal(r.json?.error?.code, code, r.body.toString());
  assert.equal(typeof r.json.error.message, 'string');
  if (field !== undefined) assert.equal(r.json.error.field, field, r.body.toString());
}

before(async () => {
  tmp = mkdtempSync(path.join(tmpdir(), 'aas-rest-'));
  aasd = await startAasd(vmEnv('rest', { AAS_MAX_BODY_BYTES: String(BODY_LIMIT) }));
  alice = await newAccount();
  bob = await newAccount();
});

after(async () => {
  await aasd?.stop();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

// ---- the document and the routes ----

async function openapi() {
  const r = await curl('GET', '/v1/openapi.json');
  assert.equal(r.status, 200);
  assert.match(r.headers['content-type'], /^application\/json/);
  return r.json;
}

function deref(doc, node) {
  if (!node?.$ref) return node;
  let cur = doc;
  for (const part of node.$ref.slice(2).split('/')) cur = cur?.[part];
  assert.ok(cur, `${node.$ref} resolves`);
  return cur;
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

function concrete(p) {
  return p.replace('{sandbox_id}', NO_SBX).replace('{command_id}', NO_CMD);
}

function templateMatches(template, p) {
  const re = new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`);
  return re.test(p);
}

test('info and the OpenAPI document need no key', async () => {
  const doc = await openapi();
  assert.equal(doc.openapi, '3.1.0');
  assert.equal(doc.servers[0].url, aasd.url);
  const info = await curl('GET', '/v1/info');
  assert.equal(info.status, 200);
  assert.equal(info.json.name, 'aas');
  assert.equal(info.json.endpoints.rest, `${aasd.url}/v1`);
  assert.equal(info.json.endpoints.openapi, `${aasd.url}/v1/openapi.json`);
  // The same object the MCP tool returns.
  const sid = await openSession(aasd.mcpUrl);
  const mcp = await post(aasd.mcpUrl, { jsonrpc: '2.0', id: 2, method: 'tools/call',
    params: { name: 'get_service_info', arguments: {} } },
  { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL });
  const sc = mcp.json.result.structuredContent;
  delete sc.capacity;
  delete info.json.capacity;
  assert.deepEqual(info.json, sc);
});

test('every documented route answers, and nothing else does', async () => {
  const doc = await openapi();
  const paths = Object.keys(doc.paths);
  assert.ok(paths.length >= 10);
  for (const p of paths) {
    const methods = METHODS.filter((m) => doc.paths[p][m]);
    for (const m of methods) {
      const anonymous = Array.isArray(doc.paths[p][m].security) &&
        doc.paths[p][m].security.length === 0;
      const r = await curl(m.toUpperCase(), concrete(p));
      // Routed: anonymous ones answer, the rest ask for a key.
      assert.equal(r.status, anonymous ? 200 : 401, `${m} ${p}: ${r.status} ${r.body}`);
      if (!anonymous) {
        expectError(r, 401, 'unauthorized');
        assert.equal(r.headers['www-authenticate'], 'Bearer');
      }
    }
    for (const m of METHODS.filter((x) => !methods.includes(x))) {
      const r = await curl(m.toUpperCase(), concrete(p));
      expectError(r, 405, 'method_not_allowed');
      assert.deepEqual(r.headers.allow.split(', ').map((x) => x.toLowerCase()).sort(),
        [...methods].sort(), `${p} Allow`);
    }
  }
  // Reads with a key reach the operation: 404 names the sandbox, not the route.
  for (const p of paths.filter((x) => x.includes('{sandbox_id}'))) {
    if (!doc.paths[p].get) continue;
    const q = p.endsWith('/files/content') ? '?path=x' : '';
    const r = await curl('GET', concrete(p) + q, { key: bob.api_key });
    expectError(r, 404, 'not_found', 'sandbox_id');
  }
  const near = ['/v1', '/v1/', '/v1/infos', '/v1/info/', '/v1/sandbox', '/v1/sandboxes/',
    `/v1/sandboxes/${NO_SBX}/`, `/v1/sandboxes/${NO_SBX}/file`,
    `/v1/sandboxes/${NO_SBX}/files/`, `/v1/sandboxes/${NO_SBX}/files/contents`,
    `/v1/sandboxes/${NO_SBX}/files/content/x`, `/v1/sandboxes/${NO_SBX}/command`,
    `/v1/sandboxes/${NO_SBX}/commands/${NO_CMD}/x`, `/v1/sandboxes/${NO_SBX}/extend/x`,
    `/v1/sandboxes/${NO_SBX}/x`, '/v1/usage/x', '/v1/openapi', '/v1/openapi.yaml',
    '/v2/info', '/v1//sandboxes', '/V1/info']
    .filter((p) => !paths.some((t) => templateMatches(t, p)));
  for (const p of near) {
    for (const m of ['GET', 'POST']) {
      const r = await curl(m, p, { key: bob.api_key });
      expectError(r, 404, 'not_found');
      assert.equal(r.json.error.message, 'no such endpoint', p);
    }
  }
});

test('request bodies and query parameters are the tools\' own schemas', async () => {
  const doc = await openapi();
  const sid = await openSession(aasd.mcpUrl);
  const list = await post(aasd.mcpUrl, { jsonrpc: '2.0', id: 3, method: 'tools/list' },
    { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL });
  const tools = Object.fromEntries(list.json.result.tools.map((t) => [t.name, t]));
  assert.equal(Object.keys(tools).length, 19);
  const bodies = { '/v1/sandboxes': 'create_sandbox', '/v1/sandboxes/{sandbox_id}/extend': 'extend_sandbox',
    '/v1/sandboxes/{sandbox_id}/commands': 'run_command', '/v1/sandboxes/{sandbox_id}/ports': 'expose_port' };
  for (const [p, tool] of Object.entries(bodies)) {
    const want = structuredClone(tools[tool].inputSchema);
    delete want.properties.sandbox_id;
    if (want.required) want.required = want.required.filter((x) => x !== 'sandbox_id');
    if (want.required?.length === 0) delete want.required;
    const got = deref(doc, doc.paths[p].post.requestBody.content['application/json'].schema);
    assert.deepEqual(got, want, p);
  }
  const queries = { '/v1/usage': ['get', 'get_usage'], '/v1/sandboxes': ['get', 'list_sandboxes'],
    '/v1/sandboxes/{sandbox_id}/files': ['get', 'list_files'],
    '/v1/sandboxes/{sandbox_id}/files/content': ['get', 'read_file'] };
  for (const [p, [m, tool]] of Object.entries(queries)) {
    for (const param of doc.paths[p][m].parameters) {
      const got = deref(doc, deref(doc, param).schema);
      assert.deepEqual(got, tools[tool].inputSchema.properties[param.name], `${p} ${param.name}`);
    }
  }
});

// ---- errors that need no VM ----

test('keys: none, bad, malformed, in the URL; origin', async () => {
  expectError(await curl('GET', '/v1/sandboxes'), 401, 'unauthorized');
  const bad = await curl('GET', '/v1/sandboxes', { key: 'aas_sk_nope' });
  expectError(bad, 401, 'unauthorized');
  assert.match(bad.headers['www-authenticate'], /invalid_token/);
  expectError(await curl('GET', '/v1/usage', { headers: { Authorization: 'Basic abc' } }),
    401, 'unauthorized');
  expectError(await curl('GET', '/v1/usage', { bearer: bob.api_key, key: alice.api_key }),
    401, 'unauthorized');
  assert.equal((await curl('GET', '/v1/usage', { bearer: bob.api_key })).status, 200);
  const inUrl = await curl('GET', `/v1/usage?api_key=${bob.api_key}`);
  expectError(inUrl, 400, 'key_in_url');
  assert.ok(!aasd.log().includes(bob.api_key), 'a key reached the log');
  expectError(await curl('GET', '/v1/usage', { key: bob.api_key,
    headers: { Origin: 'http://evil.example' } }), 403, 'forbidden');
});

test('bad JSON, bad bodies and bad query values are 400 naming the field', async () => {
  const k = { key: bob.api_key };
  expectError(await curl('POST', '/v1/sandboxes', { ...k, json: '{"size": ' }), 400,
    'invalid_argument', 'body');
  expectError(await curl('POST', '/v1/sandboxes', { ...k, json: '[1]' }), 400,
    'invalid_argument', 'body');
  expectError(await curl('POST', '/v1/sandboxes', { ...k, json: { sise: 'small' } }), 400,
    'invalid_argument', 'sise');
  expectError(await curl('POST', '/v1/sandboxes', { ...k, json: { size: 'huge' } }), 400,
    'invalid_argument', 'size');
  expectError(await curl('POST', `/v1/sandboxes/${NO_SBX}/extend`, { ...k, json: {} }), 400,
    'invalid_argument', 'minutes');
  expectError(await curl('POST', `/v1/sandboxes/${NO_SBX}/extend`,
    { ...k, json: { minutes: 1, sandbox_id: NO_SBX } }), 400, 'invalid_argument', 'sandbox_id');
  for (const [q, field] of [['limit=abc', 'limit'], ['limit=1.5', 'limit'], ['limit=%2B1', 'limit'],
    ['limit=', 'limit'], ['limit=0', 'limit'], ['limit=1&limit=2', 'limit'], ['lmit=1', 'lmit'],
    ['state=gone', 'state'], ['cursor=%zz', 'cursor']]) {
    expectError(await curl('GET', `/v1/sandboxes?${q}`, k), 400, 'invalid_argument', field);
  }
  expectError(await curl('GET', '/v1/usage?limit=9x', k), 400, 'invalid_argument', 'limit');
  assert.equal((await curl('GET', '/v1/usage?limit=5', k)).status, 200);
  const list = await curl('GET', '/v1/sandboxes?state=live&limit=5', k);
  assert.equal(list.status, 200);
  assert.deepEqual(list.json.sandboxes, []);
  // A path id that cannot name a sandbox names none.
  expectError(await curl('GET', '/v1/sandboxes/not-an-id', k), 404, 'not_found', 'sandbox_id');
  assert.match((await curl('GET', '/v1/sandboxes/not-an-id', k)).json.error.message, /not-an-id/);
  expectError(await curl('DELETE', `/v1/sandboxes/${NO_SBX}`, k), 404, 'not_found', 'sandbox_id');
  expectError(await curl('GET', `/v1/sandboxes/${NO_SBX}/commands/${NO_CMD}`, k), 404,
    'not_found', 'sandbox_id');
});

test('413 above the body limits: JSON routes and MCP the configured one, uploads AAS_MAX_FILE_BYTES', async () => {
  const big = tmpFile('json-big', `{"name": "${'a'.repeat(BODY_LIMIT)}"}`);
  const r = await curl('POST', '/v1/sandboxes', { key: bob.api_key, file: big });
  expectError(r, 413, 'payload_too_large');
  const m = await post(aasd.mcpUrl, 'x'.repeat(BODY_LIMIT + 1));
  assert.equal(m.status, 413);
  // An upload claiming more than the file limit is refused from its headers.
  const u = await curl('PUT', `/v1/sandboxes/${NO_SBX}/files/content?path=x`,
    { key: bob.api_key, file: tmpFile('upload-claim', 'x'),
      headers: { 'Content-Length': String(FILE_LIMIT + 1) } });
  expectError(u, 413, 'payload_too_large');
  assert.match(u.json.error.message, /AAS_MAX_FILE_BYTES/);
  // Far above AAS_MAX_BODY_BYTES passes the HTTP layer (and reaches the
  // operation, whose answer waits for the body to be read).
  const at = tmpFile('upload-at', Buffer.alloc(UPLOAD_SIZE, 1));
  const ok = await curl('PUT', `/v1/sandboxes/${NO_SBX}/files/content?path=x`,
    { key: bob.api_key, file: at });
  expectError(ok, 404, 'not_found', 'sandbox_id');
});

// ---- one sandbox, every operation ----

test('create a sandbox', async () => {
  const r = await curl('POST', '/v1/sandboxes',
    { bearer: alice.api_key, json: { size: 'small', timeout_minutes: 30, name: 'rest' } });
  assert.equal(r.status, 201, r.body.toString());
  sbx = r.json.sandbox_id;
  assert.match(sbx, /^sbx-[a-z0-9]{16}$/);
  assert.equal(r.json.state, 'running');
  assert.equal(r.json.name, 'rest');
  assert.equal(r.headers.location, `/v1/sandboxes/${sbx}`);
});

test('get, list, extend; another account sees nothing', async () => {
  const k = { key: alice.api_key };
  const g = await curl('GET', `/v1/sandboxes/${sbx}`, k);
  assert.equal(g.status, 200);
  assert.equal(g.json.state, 'running');
  const l = await curl('GET', '/v1/sandboxes?state=live&limit=10', k);
  assert.equal(l.status, 200);
  assert.deepEqual(l.json.sandboxes.map((s) => s.sandbox_id), [sbx]);
  const x = await curl('POST', `/v1/sandboxes/${sbx}/extend`, { ...k, json: { minutes: 5 } });
  assert.equal(x.status, 200, x.body.toString());
  assert.equal(x.json.sandbox_id, sbx);
  assert.ok(x.json.expires_at > g.json.expires_at);
  const b = { key: bob.api_key };
  expectError(await curl('GET', `/v1/sandboxes/${sbx}`, b), 404, 'not_found');
  expectError(await curl('POST', `/v1/sandboxes/${sbx}/extend`, { ...b, json: { minutes: 1 } }),
    404, 'not_found');
  expectError(await curl('POST', `/v1/sandboxes/${sbx}/commands`, { ...b, json: { command: 'id' } }),
    404, 'not_found');
  expectError(await curl('GET', `/v1/sandboxes/${sbx}/files`, b), 404, 'not_found');
  expectError(await curl('GET', `/v1/sandboxes/${sbx}/files/content?path=.bashrc`, b), 404,
    'not_found');
  expectError(await curl('PUT', `/v1/sandboxes/${sbx}/files/content?path=x`,
    { ...b, file: tmpFile('tiny', 'x') }), 404, 'not_found');
  expectError(await curl('DELETE', `/v1/sandboxes/${sbx}`, b), 404, 'not_found');
  assert.deepEqual((await curl('GET', '/v1/sandboxes', b)).json.sandboxes, []);
});

test('run a command in the foreground', async () => {
  const r = await curl('POST', `/v1/sandboxes/${sbx}/commands`, { key: alice.api_key,
    json: { command: 'echo "$X"; echo err >&2; cat; exit 3', env: { X: 'hi' }, stdin: 'in\n' } });
  assert.equal(r.status, 200, r.body.toString());
  assert.equal(r.json.stdout, 'hi\nin\n');
  assert.equal(r.json.stderr, 'err\n');
  assert.equal(r.json.exit_code, 3);
  assert.equal(r.json.state, 'exited');
  const s = await curl('GET', `/v1/sandboxes/${sbx}/commands/${r.json.command_id}`,
    { key: alice.api_key });
  assert.equal(s.status, 200);
  assert.equal(s.json.state, 'exited');
  assert.equal(s.json.exit_code, 3);
  assert.equal(s.json.background, false);
  assert.equal(s.json.stdout_bytes, 6);
});

test('run a command in the background and follow it', async () => {
  const k = { key: alice.api_key };
  const r = await curl('POST', `/v1/sandboxes/${sbx}/commands`,
    { ...k, json: { command: 'sleep 3; echo done; exit 4', background: true } });
  assert.equal(r.status, 202, r.body.toString());
  const cmd = r.json.command_id;
  assert.equal(r.json.state, 'running');
  assert.equal(r.headers.location, `/v1/sandboxes/${sbx}/commands/${cmd}`);
  let s = await curl('GET', r.headers.location, k);
  assert.equal(s.status, 200);
  assert.equal(s.json.command_id, cmd);
  assert.equal(s.json.background, true);
  assert.equal(s.json.command, 'sleep 3; echo done; exit 4');
  const deadline = Date.now() + 60000;
  while (s.json.state === 'running' && Date.now() < deadline) {
    await new Promise((res) => setTimeout(res, 500));
    s = await curl('GET', r.headers.location, k);
  }
  assert.equal(s.json.state, 'exited');
  assert.equal(s.json.exit_code, 4);
  assert.equal(s.json.stdout_bytes, 5);
  assert.ok(s.json.ended_at);
  const log = await curl('GET', `/v1/sandboxes/${sbx}/files/content?path=${encodeURIComponent(s.json.stdout_path)}`, k);
  assert.equal(log.status, 200);
  assert.equal(log.body.toString(), 'done\n');
  expectError(await curl('GET', `/v1/sandboxes/${sbx}/commands/${NO_CMD}`, k), 404,
    'not_found', 'command_id');
  expectError(await curl('GET', `/v1/sandboxes/${sbx}/commands/nope`, k), 404,
    'not_found', 'command_id');
  expectError(await curl('GET', `/v1/sandboxes/${sbx}/commands/${cmd}`, { key: bob.api_key }),
    404, 'not_found');
});

test('binary files go in and out as raw bytes (SHA-256), also with NUL bytes', async () => {
  const k = { key: alice.api_key };
  const data = randomBytes(1536 * 1024 + 7);
  const up = await curl('PUT', `/v1/sandboxes/${sbx}/files/content?path=bin/blob.dat&mode=0600`,
    { ...k, file: tmpFile('blob', data) });
  assert.equal(up.status, 200, up.body.toString());
  assert.equal(up.json.bytes_written, data.length);
  assert.equal(up.json.path, '/home/sandbox/bin/blob.dat');
  assert.equal(up.json.mode, '0600');
  const down = await curl('GET', `/v1/sandboxes/${sbx}/files/content?path=%2Fhome%2Fsandbox%2Fbin%2Fblob.dat`, k);
  assert.equal(down.status, 200);
  assert.equal(down.headers['content-type'], 'application/octet-stream');
  assert.equal(down.headers['x-aas-file-size'], String(data.length));
  assert.equal(down.headers['x-aas-content-offset'], '0');
  assert.equal(sha(down.body), sha(data));
  // A page.
  const page = await curl('GET', `/v1/sandboxes/${sbx}/files/content?path=bin/blob.dat&offset=1000&length=5000`, k);
  assert.equal(page.status, 200);
  assert.equal(page.headers['x-aas-content-offset'], '1000');
  assert.equal(page.headers['x-aas-file-size'], String(data.length));
  assert.ok(page.body.equals(data.subarray(1000, 6000)));
  // NUL bytes and high bytes, and an empty file.
  const nul = Buffer.concat([Buffer.from('a\0b\0\0c'), Buffer.alloc(4096), Buffer.from([0xff, 0xfe, 0, 1])]);
  const w = await curl('PUT', `/v1/sandboxes/${sbx}/files/content?path=nul.bin&make_parents=false`,
    { ...k, file: tmpFile('nul', nul) });
  assert.equal(w.status, 200, w.body.toString());
  const r = await curl('GET', `/v1/sandboxes/${sbx}/files/content?path=nul.bin`, k);
  assert.ok(r.body.equals(nul));
  const e = await curl('PUT', `/v1/sandboxes/${sbx}/files/content?path=empty`,
    { ...k, file: tmpFile('empty', '') });
  assert.equal(e.status, 200, e.body.toString());
  assert.equal(e.json.bytes_written, 0);
  const er = await curl('GET', `/v1/sandboxes/${sbx}/files/content?path=empty`, k);
  assert.equal(er.status, 200);
  assert.equal(er.body.length, 0);
  assert.equal(er.headers['x-aas-file-size'], '0');
  const st = await curl('POST', `/v1/sandboxes/${sbx}/commands`,
    { ...k, json: { command: 'stat -c "%U %a %s" bin/blob.dat nul.bin' } });
  assert.equal(st.json.stdout, `sandbox 600 ${data.length}\nsandbox 644 ${nul.length}\n`);
});

test('an 8 MiB upload comes back whole, and 16 MiB in one response', async () => {
  const k = { key: alice.api_key };
  const data = randomBytes(UPLOAD_SIZE);
  const up = await curl('PUT', `/v1/sandboxes/${sbx}/files/content?path=big.bin`,
    { ...k, file: tmpFile('big', data) });
  assert.equal(up.status, 200, up.body.toString());
  assert.equal(up.json.bytes_written, UPLOAD_SIZE);
  const down = await curl('GET', `/v1/sandboxes/${sbx}/files/content?path=big.bin`, k);
  assert.equal(down.status, 200);
  assert.equal(sha(down.body), sha(data));
  // More than read_file's pages, streamed in one response.
  await curl('POST', `/v1/sandboxes/${sbx}/commands`,
    { ...k, json: { command: 'cat big.bin big.bin > huge.bin' } });
  const huge = await curl('GET', `/v1/sandboxes/${sbx}/files/content?path=huge.bin`, k);
  assert.equal(huge.status, 200);
  assert.equal(huge.headers['content-length'], String(2 * UPLOAD_SIZE));
  assert.equal(sha(huge.body), sha(Buffer.concat([data, data])));
  const tail = await curl('GET', `/v1/sandboxes/${sbx}/files/content?path=huge.bin&offset=${UPLOAD_SIZE + 10}&length=100`, k);
  assert.equal(tail.status, 200);
  assert.ok(tail.body.equals(data.subarray(10, 110)));
  assert.equal(tail.headers['x-aas-file-size'], String(2 * UPLOAD_SIZE));
});

test('list files and file errors', async () => {
  const k = { key: alice.api_key };
  const l = await curl('GET', `/v1/sandboxes/${sbx}/files?path=bin&depth=1&limit=10`, k);
  assert.equal(l.status, 200, l.body.toString());
  assert.ok(l.json.entries.some((x) => x.path.endsWith('blob.dat') && x.type === 'file'));
  const home = await curl('GET', `/v1/sandboxes/${sbx}/files`, k);
  assert.equal(home.json.path, '/home/sandbox');
  expectError(await curl('GET', `/v1/sandboxes/${sbx}/files?depth=abc`, k), 400,
    'invalid_argument', 'depth');
  expectError(await curl('GET', `/v1/sandboxes/${sbx}/files?depth=11`, k), 400,
    'invalid_argument', 'depth');
  expectError(await curl('GET', `/v1/sandboxes/${sbx}/files/content`, k), 400,
    'invalid_argument', 'path');
  expectError(await curl('GET', `/v1/sandboxes/${sbx}/files/content?path=x&offset=1x`, k), 400,
    'invalid_argument', 'offset');
  expectError(await curl('GET', `/v1/sandboxes/${sbx}/files/content?path=x&length=4194305`, k),
    400, 'invalid_argument', 'length');
  expectError(await curl('GET', `/v1/sandboxes/${sbx}/files/content?path=no/such/file`, k), 404,
    'not_found');
  expectError(await curl('PUT', `/v1/sandboxes/${sbx}/files/content?path=x&mode=999`,
    { ...k, file: tmpFile('m', 'x') }), 400, 'invalid_argument', 'mode');
  expectError(await curl('PUT', `/v1/sandboxes/${sbx}/files/content?path=x&make_parents=yes`,
    { ...k, file: tmpFile('m2', 'x') }), 400, 'invalid_argument', 'make_parents');
  const denied = await curl('PUT', `/v1/sandboxes/${sbx}/files/content?path=/etc/passwd`,
    { ...k, file: tmpFile('m3', 'x') });
  assert.equal(denied.status, 400);
  assert.match(denied.json.error.message, /denied/i);
});

test('ports: expose, list, errors', async () => {
  const k = { key: alice.api_key };
  const x = await curl('POST', `/v1/sandboxes/${sbx}/ports`, { ...k, json: { port: 8080 } });
  assert.equal(x.status, 201, x.body.toString());
  assert.equal(x.json.url, `http://8080-${sbx}.localhost:${aasd.port}/`);
  assert.equal(x.json.public, true);
  const p = await curl('POST', `/v1/sandboxes/${sbx}/ports`, { ...k, json: { port: 8081, public: false } });
  assert.equal(p.status, 201);
  assert.match(p.json.token, /^aas_pt_/);
  assert.match(p.json.signed_url, /aas_preview_sig=/);
  const l = await curl('GET', `/v1/sandboxes/${sbx}/ports`, k);
  assert.equal(l.status, 200);
  assert.deepEqual(l.json.ports.map((q) => [q.port, q.public]), [[8080, true], [8081, false]]);
  expectError(await curl('POST', `/v1/sandboxes/${sbx}/ports`, { ...k, json: { port: 8080 } }), 409, 'conflict');
  expectError(await curl('POST', `/v1/sandboxes/${sbx}/ports`, { ...k, json: { port: 0 } }), 400, 'invalid_argument');
  expectError(await curl('POST', `/v1/sandboxes/${sbx}/ports`, { ...k, json: { port: 70000 } }), 400, 'invalid_argument');
  const b = { key: bob.api_key };
  expectError(await curl('GET', `/v1/sandboxes/${sbx}/ports`, b), 404, 'not_found');
  expectError(await curl('POST', `/v1/sandboxes/${sbx}/ports`, { ...b, json: { port: 9000 } }), 404, 'not_found');
});

test('usage shows the sandbox', async () => {
  const u = await curl('GET', '/v1/usage?limit=5', { key: alice.api_key });
  assert.equal(u.status, 200);
  assert.ok(u.json.balance < 200000);
  assert.ok(u.json.sandboxes.some((s) => s.sandbox_id === sbx));
});

test('destroy, then the sandbox is gone for commands and files', async () => {
  const k = { key: alice.api_key };
  const d = await curl('DELETE', `/v1/sandboxes/${sbx}`, k);
  assert.equal(d.status, 200, d.body.toString());
  assert.equal(d.json.state, 'destroyed');
  assert.ok(d.json.refunded > 0);
  const again = await curl('DELETE', `/v1/sandboxes/${sbx}`, k);
  assert.equal(again.status, 200);
  assert.equal(again.json.state, 'destroyed');
  const g = await curl('GET', `/v1/sandboxes/${sbx}`, k);
  assert.equal(g.status, 200);
  assert.equal(g.json.state, 'destroyed');
  expectError(await curl('POST', `/v1/sandboxes/${sbx}/commands`, { ...k, json: { command: 'true' } }),
    409, 'conflict');
  expectError(await curl('GET', `/v1/sandboxes/${sbx}/files/content?path=nul.bin`, k), 409, 'conflict');
  expectError(await curl('PUT', `/v1/sandboxes/${sbx}/files/content?path=x`,
    { ...k, file: tmpFile('late', 'x') }), 409, 'conflict');
  expectError(await curl('POST', `/v1/sandboxes/${sbx}/extend`, { ...k, json: { minutes: 1 } }),
    409, 'conflict');
  const cmds = g.json.commands;
  assert.ok(cmds.length >= 2);
  const s = await curl('GET', `/v1/sandboxes/${sbx}/commands/${cmds[0].command_id}`, k);
  assert.equal(s.status, 200);
  assert.equal(s.json.stdout_bytes, null);
});
