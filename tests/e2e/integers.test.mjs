// Integer arguments are integers, end to end: every integer field of every
// tool in tools/list, every integer field of every REST JSON body and every
// integer query parameter in the OpenAPI document is sent a whole-number
// real (60.0, 1e3, the minimum as a real). Each call is refused naming the
// field, aasd stays up and nothing is charged. The fields are found by
// walking the published schemas, so a new one is covered without an edit
// here. One small sandbox gives the calls that need one a real id.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startAasd, newAccount, vmEnv, openSession, post, sseMessages, PROTOCOL } from './lib/harness.mjs';
import {
  MAX_DEPTH, types, validInteger, extraKey, minimal as minimalOf, operations,
} from './lib/schema.mjs';

const NO_CMD = 'cmd-0000000000000000';
const NO_SNAP = 'snp-0000000000000000';
// Stands in the arguments where the real goes: JSON.stringify writes 60.0
// as 60, so the real is put into the text afterwards.
const SENTINEL = '__aas_real_here__';

let aasd;
let acct;
let sid;
let sbx;
let rpcId = 100;

// ---- schemas ----

// The smallest instance the schema takes; a string field that fits takes
// the real sandbox's id (or a command or snapshot id naming nothing).
const minimal = (schema) => minimalOf(schema, [sbx, NO_CMD, NO_SNAP]);

// Every integer field below schema: {steps, schema}, a step being
// {key, schema} for a property or {index: 0, schema} for an array item.
function* integerFields(schema, steps = []) {
  if (typeof schema !== 'object' || schema === null) return;
  if (types(schema).includes('integer')) yield { steps, schema };
  assert.ok(steps.length < MAX_DEPTH, 'schema nested too deeply');
  for (const [key, sub] of Object.entries(schema.properties ?? {})) {
    yield* integerFields(sub, [...steps, { key, schema: sub }]);
  }
  if (typeof schema.additionalProperties === 'object') {
    const sub = schema.additionalProperties;
    yield* integerFields(sub, [...steps, { key: extraKey(schema), schema: sub }]);
  }
  if (typeof schema.items === 'object') {
    yield* integerFields(schema.items, [...steps, { index: 0, schema: schema.items }]);
  }
}

// The validator's name for the field: a.b, a[0].c.
function fieldPath(steps) {
  let p = '';
  for (const s of steps) {
    if (s.key !== undefined) p += (p ? '.' : '') + s.key;
    else p = `${p || 'arguments'}[0]`;
  }
  return p;
}

// Puts value at the end of the steps, making the containers on the way.
function put(root, steps, value) {
  let cur = root;
  steps.forEach((s, i) => {
    const k = s.key ?? s.index;
    if (i === steps.length - 1) cur[k] = value;
    else {
      if (cur[k] === undefined) cur[k] = minimal(s.schema);
      cur = cur[k];
    }
  });
  return root;
}

// The JSON text of base with the field set to the literal real.
function textWithReal(base, steps, real) {
  const text = JSON.stringify(put(structuredClone(base), steps, SENTINEL));
  assert.ok(text.includes(JSON.stringify(SENTINEL)));
  return text.replace(JSON.stringify(SENTINEL), real);
}

// The reals sent to an integer field: whole numbers all, as JSON reals.
function realsFor(schema) {
  return [`${validInteger(schema)}.0`, '60.0', '1e3'];
}

// ---- MCP and REST ----

function mcpHeaders() {
  return { 'x-api-key': acct.api_key, 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL };
}

// One JSON-RPC request whose params are given as JSON text; its answer.
async function rpcText(method, paramsText) {
  const id = rpcId++;
  const r = await post(aasd.mcpUrl, `{"jsonrpc":"2.0","id":${id},"method":"${method}","params":${paramsText}}`,
    mcpHeaders());
  assert.equal(r.status, 200, `${method}: ${r.status} ${r.text}`);
  const msgs = /^text\/event-stream/.test(r.headers.get('content-type') ?? '') ? sseMessages(r.text) : [r.json];
  const msg = msgs.find((m) => m?.id === id);
  assert.ok(msg, `${method}: no answer to ${id} in ${r.text.slice(0, 500)}`);
  return msg;
}

async function callTool(name, argsText) {
  return rpcText('tools/call', `{"name":${JSON.stringify(name)},"arguments":${argsText}}`);
}

async function callOk(name, args) {
  const msg = await callTool(name, JSON.stringify(args));
  assert.ok(msg.result && !msg.result.isError, `${name}: ${JSON.stringify(msg)}`);
  return msg.result.structuredContent;
}

// The text of a refusal: an isError result or a JSON-RPC error.
function refusalText(msg, what) {
  if (msg.error) return `${msg.error.message} ${JSON.stringify(msg.error.data ?? '')}`;
  assert.equal(msg.result?.isError, true, `${what} was not refused: ${JSON.stringify(msg).slice(0, 500)}`);
  return msg.result.content.map((c) => c.text).join('\n');
}

// The schema validator's refusal, so the edge refused it, not a handler.
const NOT_INTEGER = /must be integer\b.*, not a number with a fraction part or exponent/;

function assertNamesField(text, path, what) {
  assert.ok(text.includes(`${path}: `), `${what}: "${text}" does not name ${path}`);
  assert.match(text, NOT_INTEGER, `${what}: "${text}" is not the schema's refusal`);
}

async function rest(method, urlPath, bodyText) {
  const headers = { 'x-api-key': acct.api_key };
  if (bodyText !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch(`${aasd.url}${urlPath}`, { method, headers, body: bodyText });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, text, json };
}

function expect400(r, field, what) {
  assert.equal(r.status, 400, `${what}: ${r.status} ${r.text}`);
  assert.equal(r.json?.error?.code, 'invalid_argument', `${what}: ${r.text}`);
  assert.equal(r.json.error.field, field, `${what}: ${r.text}`);
}

function concrete(p) {
  return p.replace('{sandbox_id}', sbx).replace('{command_id}', NO_CMD).replace('{snapshot_id}', NO_SNAP);
}

// What must not move: the balance and the newest ledger entry.
async function money() {
  const u = await callOk('get_usage', {});
  return { balance: u.balance, ledger: u.ledger?.length ?? 0, newest: JSON.stringify(u.ledger?.[0] ?? null) };
}

async function expiresAt() {
  return (await callOk('get_sandbox', { sandbox_id: sbx })).expires_at;
}

async function assertUp() {
  assert.equal(aasd.proc.exitCode, null, `aasd exited:\n${aasd.log().slice(-2000)}`);
  assert.equal((await fetch(`${aasd.url}/healthz`)).status, 200);
}

before(async () => {
  aasd = await startAasd(vmEnv('integers'));
  acct = await newAccount();
  sid = await openSession(aasd.mcpUrl, { 'x-api-key': acct.api_key });
  const r = await rest('POST', '/v1/sandboxes', JSON.stringify({ size: 'small', timeout_minutes: 10 }));
  assert.equal(r.status, 201, r.text);
  sbx = r.json.sandbox_id;
});

after(async () => {
  if (sbx) await rest('DELETE', `/v1/sandboxes/${sbx}`).catch(() => {});
  await aasd?.stop();
});

// ---- the tests ----

test('every integer field of every tool refuses a whole-number real over MCP', async () => {
  const list = await rpcText('tools/list', '{}');
  const tools = list.result.tools;
  assert.ok(tools.length > 0);
  const m0 = await money();
  const e0 = await expiresAt();
  let fields = 0;
  for (const tool of tools) {
    const base = minimal(tool.inputSchema);
    for (const { steps, schema } of integerFields(tool.inputSchema)) {
      const path = fieldPath(steps);
      for (const real of realsFor(schema)) {
        const what = `${tool.name} ${path}=${real}`;
        const msg = await callTool(tool.name, textWithReal(base, steps, real));
        assertNamesField(refusalText(msg, what), path, what);
      }
      fields++;
    }
  }
  console.log(`MCP: ${fields} integer fields in ${tools.length} tools`);
  assert.ok(fields > 0, 'no integer field in tools/list: the walk tests nothing');
  await assertUp();
  assert.deepEqual(await money(), m0, 'the refused calls changed the account');
  assert.equal(await expiresAt(), e0);
});

test('extend_sandbox with minutes 60.0 moves nothing and charges nothing', async () => {
  const m0 = await money();
  const e0 = await expiresAt();
  const msg = await callTool('extend_sandbox', `{"sandbox_id":"${sbx}","minutes":60.0}`);
  assertNamesField(refusalText(msg, 'extend_sandbox'), 'minutes', 'extend_sandbox');
  for (const body of ['{"minutes": 60.0}', '{"minutes": 6e1}']) {
    const res = await rest('POST', `/v1/sandboxes/${sbx}/extend`, body);
    expect400(res, 'minutes', `POST extend ${body}`);
    assertNamesField(res.json.error.message, 'minutes', `POST extend ${body}`);
  }
  await assertUp();
  assert.equal(await expiresAt(), e0, 'expires_at moved');
  assert.deepEqual(await money(), m0, 'the balance moved');
  // The same request with an integer does extend: the refusal was the real.
  const x = await callOk('extend_sandbox', { sandbox_id: sbx, minutes: 1 });
  assert.equal(Date.parse(x.expires_at) - Date.parse(e0), 60000);
});

test('REST: integer fields of JSON bodies and integer query parameters refuse reals with 400', async () => {
  const r = await fetch(`${aasd.url}/v1/openapi.json`);
  assert.equal(r.status, 200);
  const doc = await r.json();
  const m0 = await money();
  const e0 = await expiresAt();
  let bodyFields = 0;
  let queryParams = 0;
  for (const { method, template, params: all, body: schema } of operations(doc)) {
    if (schema) {
      const base = minimal(schema);
      for (const { steps, schema: fs } of integerFields(schema)) {
        const path = fieldPath(steps);
        for (const real of realsFor(fs)) {
          const what = `${method} ${template} ${path}=${real}`;
          const res = await rest(method, concrete(template), textWithReal(base, steps, real));
          expect400(res, path, what);
          assertNamesField(res.json.error.message, path, what);
        }
        bodyFields++;
      }
    }
    const params = all.filter((p) => p.in === 'query');
    for (const p of params.filter((x) => types(x.schema).includes('integer'))) {
      // The other required parameters get valid values.
      const rest0 = params.filter((x) => x.required && x.name !== p.name)
        .map((x) => `${encodeURIComponent(x.name)}=${encodeURIComponent(String(minimal(x.schema)))}`);
      for (const real of [...realsFor(p.schema), '1.5', '-1.0']) {
        const q = [...rest0, `${encodeURIComponent(p.name)}=${encodeURIComponent(real)}`].join('&');
        const what = `${method} ${template}?${q}`;
        expect400(await rest(method, `${concrete(template)}?${q}`), p.name, what);
      }
      queryParams++;
    }
  }
  console.log(`REST: ${bodyFields} integer body fields, ${queryParams} integer query parameters`);
  assert.ok(bodyFields > 0, 'no integer field in any JSON body: the walk tests nothing');
  assert.ok(queryParams > 0, 'no integer query parameter: the walk tests nothing');
  await assertUp();
  assert.deepEqual(await money(), m0, 'the refused requests changed the account');
  assert.equal(await expiresAt(), e0);
});
