// Black-box fuzzing of the live daemon. Argument sets are generated from
// the schemas the service publishes (tools/list and /v1/openapi.json) with
// a seeded generator: wrong types, reals for integers, huge and negative
// numbers, empty and very long strings, NUL, lone surrogates and invalid
// UTF-8, unknown fields, missing required fields, deep nesting, mixed with
// valid values so the handlers are reached. Every tool is called over MCP
// (with a key, anonymously, without a session) and every REST route with
// odd path ids; malformed JSON-RPC envelopes and JSON bodies come too.
//
// Oracles: no answer is a 5xx, a hang, a JSON-RPC internal error or a
// tool's "internal" error; every refusal carries a message; aasd answers
// /healthz after each batch and is the same process at the end; another
// account's sandbox answers exactly as an id that names nothing, and is
// unchanged; the ledger sums to the balance of every account; no VM is
// left once the test's sandboxes are destroyed.
//
// AAS_BLACKBOX_SEED=N replays a run (the seed is printed and named in
// every failure); AAS_BLACKBOX_CASES=N sets the generated calls per test,
// AAS_BLACKBOX_PARALLEL=N how many are in flight at once (4).
//
// What a seed costs: nearly every call is answered in milliseconds, but a
// pause that takes effect saves the guest's memory (seconds under TCG),
// the resume after it restores it (about ten), and a snapshot does both
// at once (over ten). Left to the seed, the own sandbox was paused and
// resumed about 30 times in a run (seed 1) and snapshotted up to the
// account's limit (5), and a run took from 2 to 11 minutes, the longest
// file of make test. So in each test at most OWN_PAUSES pauses and
// OWN_SNAPSHOTS snapshots of the own sandbox take effect; once they are
// spent, a generated pause or snapshot names bob's sandbox instead (it is
// sent and checked as every other call, and must be refused as one that
// does not exist). Resumes stay free, so the sandbox soon runs again.
// The values generated stay the seed's; which of them were redirected
// follows from the answers, and each failure names its call as sent.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { randomInt } from 'node:crypto';
import {
  startAasd, newAccount, vmEnv, STATE, DB_URL, sseMessages, PROTOCOL, initializeBody, sleep, psql, qemuIds
} from './lib/harness.mjs';
import { types, stringFits, minimal, operations } from './lib/schema.mjs';


const SEED = process.env.AAS_BLACKBOX_SEED !== undefined ?
  Number(process.env.AAS_BLACKBOX_SEED) >>> 0 : randomInt(2 ** 31);
const CASES = Number(process.env.AAS_BLACKBOX_CASES ?? 2000);
const BODY_LIMIT = 1 << 20;   // AAS_MAX_BODY_BYTES of the daemon under test
const DRAIN_LIMIT = 65536;    // AAS_MAX_ANON_BODY_BYTES: what aasd reads of a body it refuses unread
const REQUEST_MS = 60000;     // an answer slower than this is a hang
const ANSWER_MAX = 4 << 20;   // bytes of a 2xx answer read before it is cut
const BOOT_MS = 300000;       // but a create boots a VM (TCG here)
const PARALLEL = Number(process.env.AAS_BLACKBOX_PARALLEL ?? 4); // calls in flight at once
const BATCH = 50;             // calls between two health checks
const MAX_FINDINGS = 25;      // failures kept for the report
const OWN_PAUSES = 2;         // pauses of the own sandbox that take effect, per test
const OWN_SNAPSHOTS = 1;      // and snapshots of it

// Answers above 499 that the service documents, none of which a healthy
// daemon with its database up can give here: 503 busy (too many GET
// streams, preview proxy out of threads) and 503 unavailable (database
// or hypervisor down, a host not served by this instance). So every 5xx
// is a finding; 429 busy with Retry-After is below 500 and allowed.

// ---- seeded generator ----

// mulberry32: small, fast, and the same sequence for the same seed.
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rnd = prng(SEED);
const int = (n) => Math.floor(rnd() * n);
const pick = (a) => a[int(a.length)];
const chance = (p) => rnd() < p;

// JSON text put in as is: reals JSON.stringify would rewrite (1.0),
// numbers beyond a double, nesting too deep to build as objects.
class Raw { constructor(text) { this.text = text; } }
// Stands for bytes that are not UTF-8; put into the body as bytes.
const BAD_UTF8 = '\u0001bad-utf8\u0001';
const BAD_BYTES = Buffer.from([0xff, 0xfe, 0xc0, 0x80, 0xed, 0xa0, 0x80, 0xe2, 0x82]);

function enc(v) {
  if (v instanceof Raw) return v.text;
  if (Array.isArray(v)) return `[${v.map(enc).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}:${enc(x)}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

// The body's bytes: the marker of invalid UTF-8 becomes those bytes.
function bytes(text) {
  const marker = JSON.stringify(BAD_UTF8).slice(1, -1);
  const parts = text.split(marker);
  if (parts.length === 1) return Buffer.from(text);
  return Buffer.concat(parts.flatMap((p, i) => (i ? [BAD_BYTES, Buffer.from(p)] : [Buffer.from(p)])));
}

function deep(depth) {
  return new Raw(chance(0.5) ? '['.repeat(depth) + ']'.repeat(depth) : '{"a":'.repeat(depth) + '1' + '}'.repeat(depth));
}

function longString() {
  const n = pick([300, 4097, 65537, BODY_LIMIT - 4096, BODY_LIMIT + 1]);
  return pick(['x', 'é', '😀', '\u0000']).repeat(chance(0.5) ? n : Math.ceil(n / 4));
}

const NUMBERS = ['1.0', '1e3', '1.5', '-1', '0', '-0', '0.0', '9223372036854775807', '9223372036854775808',
  '-9223372036854775809', '18446744073709551616', '4294967296', '2147483648', '-2147483649', '1e308',
  '-1e308', '1e309', '1e-400', '1E+2', '123456789012345678901234567890', '0.1', '-1.0', '60.0'];
const STRINGS = ['', ' ', 'a', '\u0000', 'a\u0000b', '\ud800', 'x\udc00y', `a${BAD_UTF8}b`, '../../../../etc/passwd',
  '..', '%00', '\n\r\t', '😀', '\u202e\ufeff', '$(reboot)', '`id`', "'; drop table accounts; --", '-1', '1.5',
  'true', 'null', '\\', '"', '{}', 'sbx-0123456789ABCDEF', 'sbx-', '123e4567-e89b-12d3-a456-426614174000'];
const WRONG = () => pick([null, true, false, 0, -1, new Raw('1.5'), [], {}, [1, 'a'], { a: 1 }, '1', new Raw(pick(NUMBERS))]);

// A value of the kind the field does not want, or at its edges.
function hostile(schema) {
  const t = types(schema);
  const r = int(10);
  if (r === 0) return WRONG();
  if (r === 1) return deep(pick([64, 2049, 10000]));
  if (t.includes('integer') || t.includes('number')) {
    const edges = [];
    if (typeof schema.minimum === 'number') edges.push(schema.minimum - 1, new Raw(`${schema.minimum}.0`));
    if (typeof schema.maximum === 'number') edges.push(schema.maximum + 1, new Raw(`${schema.maximum}.0`));
    return chance(0.3) && edges.length ? pick(edges) : (chance(0.8) ? new Raw(pick(NUMBERS)) : pick(STRINGS));
  }
  if (t.includes('string')) {
    if (chance(0.15)) return longString();
    if (chance(0.15)) return new Raw(pick(NUMBERS));
    return pick(STRINGS);
  }
  if (t.includes('boolean')) return pick([0, 1, 'true', 'false', null, new Raw('1.0'), [], 'yes']);
  if (t.includes('object')) {
    const o = {};
    for (let i = int(4); i > 0; i--) put(o, pick(['', 'a', '\u0000', '\ud800', 'K', 'x'.repeat(300), '__proto__']), WRONG());
    return pick([o, [], 'x', deep(10000), Object.fromEntries(Array.from({ length: 70 }, (_, i) => [`K${i}`, 'v']))]);
  }
  if (t.includes('array')) return pick([{}, 'x', [WRONG(), WRONG()], deep(10000)]);
  return WRONG();
}

// ---- valid values, so the handlers are reached ----

let ids;          // { own, other, random() }: the sandbox ids in play
let cmdIds = [];  // command ids this account really has

const HINTS = {
  path: ['/tmp/bbf', 'bbf.txt', '/home/sandbox', '/', '/etc/hostname', '/tmp/bbf/a/b', '.', '/proc/self/status'],
  cwd: ['/', '/tmp', '/home/sandbox', '/nonexistent'],
  command: ['true', 'echo fuzz', 'exit 7', 'printf "%s" "$FOO"', 'echo é >&2', 'head -c 3000 /dev/zero'],
  content: ['', 'hello\n', 'é😀'],
  content_base64: ['', 'aGVsbG8=', 'AA=='],
  stdin: ['', 'x\n'],
  mode: ['0644', '755', '0600'],
  cursor: ['', 'abc', '0'],
  name: ['bb-1', 'A.b_c'],
};

function validString(schema, name, sbxOk) {
  if (/sandbox_id/.test(name)) {
    const c = sbxOk && chance(0.75) ? ids.own : (chance(0.5) ? ids.other : ids.random());
    if (stringFits(schema, c)) return c;
  }
  if (/command_id/.test(name)) {
    const c = chance(0.75) && cmdIds.length ? pick(cmdIds) : 'cmd-0000000000000000';
    if (stringFits(schema, c)) return c;
  }
  if (/snapshot/.test(name)) {
    // One that names nothing, or another account's shape of one.
    const c = pick(['snp-0000000000000000', `snp-${ids.random().slice(4)}`]);
    if (stringFits(schema, c)) return c;
  }
  const fits = [...(HINTS[name] ?? []), schema.default, 'a', 'hello', 'x'.repeat(schema.minLength ?? 1)]
    .filter((c) => typeof c === 'string' && stringFits(schema, c));
  return fits.length ? pick(fits) : minimal(schema, [ids.own]);
}

// A random instance the schema takes (as far as this validator sees).
// sbxOk: the test's own sandbox may be named (not for destroy).
function valid(schema, name = '', sbxOk = true, depth = 0) {
  if (Array.isArray(schema?.enum) && schema.enum.length) return structuredClone(pick(schema.enum));
  const t = types(schema).filter((x) => x !== 'null');
  switch (pick(t.length ? t : ['null'])) {
    case 'object': {
      const o = {};
      for (const [k, s] of Object.entries(schema.properties ?? {})) {
        if ((schema.required ?? []).includes(k) || chance(0.4)) o[k] = valid(s, k, sbxOk, depth + 1);
      }
      if (typeof schema.additionalProperties === 'object' && depth < 4) {
        for (let i = int(3); i > 0; i--) {
          const k = pick(['FOO', 'BAR_1', 'x', 'k']);
          if (stringFits(schema.propertyNames ?? {}, k)) o[k] = valid(schema.additionalProperties, k, sbxOk, depth + 1);
        }
      }
      return o;
    }
    case 'array': return Array.from({ length: Math.max(schema.minItems ?? 0, int(3)) }, () => valid(schema.items, name, sbxOk, depth + 1));
    case 'string': return validString(schema, name, sbxOk);
    case 'integer':
    case 'number': {
      const lo = schema.minimum ?? 0;
      const hi = Math.min(schema.maximum ?? lo + 1000, lo + 1000000);
      return pick([lo, hi, lo + int(hi - lo + 1), schema.default ?? lo]);
    }
    case 'boolean': return chance(0.5);
    default: return null;
  }
}

// Every field below an object schema: {steps, schema}; an object taking
// any property name gives one with a name chosen when it is set.
function fields(schema, steps = [], out = []) {
  for (const [k, s] of Object.entries(schema?.properties ?? {})) {
    out.push({ steps: [...steps, k], schema: s });
    if (types(s).includes('object') && steps.length < 4) fields(s, [...steps, k], out);
  }
  if (typeof schema?.additionalProperties === 'object') {
    out.push({ steps: [...steps, null], schema: schema.additionalProperties });
  }
  return out;
}

// Sets an own property, "__proto__" included.
function put(o, k, v) {
  Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
}

function setAt(root, steps, value) {
  let cur = root;
  steps.forEach((k, i) => {
    const key = k ?? pick(['FOO', 'lower', '1BAD', '', 'a-b', 'X'.repeat(200), '\u0000']);
    if (i === steps.length - 1) put(cur, key, value);
    else {
      if (cur[key] === null || typeof cur[key] !== 'object' || cur[key] instanceof Raw || Array.isArray(cur[key])) cur[key] = {};
      cur = cur[key];
    }
  });
}

// Arguments for an object schema: valid ones, then 0 to 3 faults.
function generate(schema, sbxOk = true) {
  let args = valid(schema, '', sbxOk);
  const all = fields(schema);
  const n = chance(0.4) ? 0 : 1 + int(3);
  const faults = [];
  for (let i = 0; i < n; i++) {
    const r = int(20);
    if (r === 0) { args = pick([WRONG(), deep(10000), longString()]); faults.push('not an object'); break; }
    if (r <= 2 && (schema.required ?? []).length) {
      const k = pick(schema.required);
      delete args[k];
      faults.push(`no ${k}`);
    } else if (r <= 4) {
      const k = pick(['unknown', 'sandbox_id ', '', '\u0000', '__proto__', 'x'.repeat(1000)]);
      put(args, k, WRONG());
      faults.push(`unknown ${JSON.stringify(k).slice(0, 20)}`);
    } else if (all.length) {
      const f = pick(all);
      setAt(args, f.steps, hostile(f.schema));
      faults.push(`bad ${f.steps.join('.')}`);
    }
  }
  return { args, faults };
}

// ---- talking to aasd ----

let aasd;
let alice;    // the account under test: one sandbox
let bob;      // another account: one sandbox alice must never reach
let carol;    // no credit: creates are refused after validation, no VM
let rpcId = 1000;
const findings = [];
let calls = 0;

// The answer in buf once it is whole: {status, headers, body} or null.
function parseAnswer(buf, closed) {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0])?.[1]);
  const headers = {};
  for (const l of lines.slice(1)) {
    const i = l.indexOf(':');
    if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  let rest = buf.subarray(end + 4);
  if (status === 100) return parseAnswer(rest, closed);
  if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
    const parts = [];
    for (;;) {
      const nl = rest.indexOf('\r\n');
      if (nl < 0) return null;
      const n = parseInt(rest.subarray(0, nl).toString('latin1'), 16);
      if (Number.isNaN(n)) return { status, headers, body: Buffer.concat(parts), bad: 'bad chunk size' };
      if (n === 0) return { status, headers, body: Buffer.concat(parts) };
      if (rest.length < nl + 2 + n + 2) return null;
      parts.push(rest.subarray(nl + 2, nl + 2 + n));
      rest = rest.subarray(nl + 2 + n + 2);
    }
  }
  if (headers['content-length'] !== undefined) {
    const n = Number(headers['content-length']);
    return rest.length >= n ? { status, headers, body: rest.subarray(0, n) } : null;
  }
  if (status === 204 || status === 304 || (status >= 100 && status < 200)) return { status, headers, body: Buffer.alloc(0) };
  return closed ? { status, headers, body: rest } : null;
}

// One request on a connection of its own, the path sent as written ('..'
// too), the body in pieces while the answer is read: aasd answers a body
// over its limit (413) before it has read it, as curl sees. Resolves
// {status, headers, text, json}; status 0 when the connection was reset
// before an answer came while a request over a limit was still going out.
let requestMs = REQUEST_MS;

// A key aasd resolves, alone in its header (two keys that disagree are
// refused before the body).
function carriesValidKey(headers) {
  const keys = [alice, bob, carol].filter(Boolean).map((a) => a.api_key);
  const x = headers['x-api-key'];
  const bearer = /^Bearer (.*)$/.exec(headers.Authorization ?? '')?.[1];
  const given = [x, bearer].filter((k) => k !== undefined);
  return given.length > 0 && given.every((k) => k === given[0]) && keys.includes(given[0]);
}

// Query names aasd refuses as a key in the URL (server/http_head.c).
const KEY_QUERY_NAMES = ['apikey', 'api_key', 'key', 'token', 'access_token', 'x-api-key'];
function keyInQuery(path) {
  const q = path.indexOf('?');
  if (q < 0) return false;
  return path.slice(q + 1).split('&').some((kv) => {
    let name = kv.split('=')[0];
    try { name = decodeURIComponent(name); } catch { /* left as sent */ }
    return KEY_QUERY_NAMES.includes(name.toLowerCase());
  });
}

// 1 when aasd refuses this method and path from the request line alone
// (no route, a key in the query, a path too long).
async function refusedOnHead(method, path, headers) {
  const r = await request(method, path, headers, '');
  return (r.status === 404 && /no such endpoint/.test(r.text)) || r.status === 414
    || r.status === 431 || (r.status === 400 && /key_in_url/.test(r.text));
}

function request(method, path, headers = {}, body) {
  return new Promise((resolve, reject) => {
    const u = new URL(aasd.url);
    const buf = body === undefined ? Buffer.alloc(0) : (Buffer.isBuffer(body) ? body : bytes(body));
    const head = [`${method} ${path} HTTP/1.1`, `Host: ${u.host}`, 'Connection: close',
      ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
      ...(body === undefined ? [] : [`Content-Length: ${buf.length}`]), '', ''].join('\r\n');
    const sock = net.connect(Number(u.port), u.hostname);
    const chunks = [];
    let done = false;
    let sent = 0;
    let received = 0;
    // A long answer (a whole tree as tar) is cut once its head is in:
    // the head is the answer this test judges.
    const cut = () => {
      const whole = Buffer.concat(chunks);
      const end = whole.indexOf('\r\n\r\n');
      const status = end < 0 ? 0 : Number(/^HTTP\/1\.[01] (\d{3})/.exec(whole.subarray(0, end).toString('latin1'))?.[1]);
      if (!(status >= 200 && status < 300)) return false;
      done = true;
      sock.destroy();
      resolve({ status, headers: {}, text: '', json: null, truncated: true });
      return true;
    };
    const finish = (closed, err) => {
      if (done) return;
      const a = parseAnswer(Buffer.concat(chunks), closed);
      if (!a && !closed) return;
      done = true;
      sock.destroy();
      if (!a) {
        // A request over a limit aasd refuses before reading all of it
        // (body: 413, head: 414/431, as curl shows) may see the reset
        // before the answer: sent, not answered, not a finding.
        // So may one refused before its body (no valid key) that is
        // larger than what aasd drains to let the answer through.
        // A key in the query is refused before the key header is looked
        // at, so the same drain bound applies to it.
        const lost = { status: 0, headers: {}, text: '', json: null };
        const fail = new Error(`${method} ${path.slice(0, 200)}: connection closed without an answer (${err?.code ?? 'eof'}, ${chunks.length} bytes)`);
        if (buf.length > BODY_LIMIT || head.length > 16384
          || (buf.length > DRAIN_LIMIT && (!carriesValidKey(headers) || keyInQuery(path)))) {
          resolve(lost);
        } else if (buf.length > DRAIN_LIMIT) {
          // A request refused on its head alone (a path no route takes)
          // is answered before the key is looked at: the same bound
          // applies. The same head with no body tells which it was.
          refusedOnHead(method, path, headers).then((yes) => (yes ? resolve(lost) : reject(fail)), reject);
        } else {
          reject(fail);
        }
        return;
      }
      const text = a.body.toString();
      let json = null;
      try { json = JSON.parse(text); } catch { /* not JSON */ }
      resolve({ status: a.status, headers: a.headers, text, json, bad: a.bad });
    };
    sock.on('data', (d) => {
      chunks.push(d);
      received += d.length;
      if (!done && received > ANSWER_MAX && cut()) return;
      finish(false);
    });
    sock.on('end', () => finish(true));
    sock.on('close', () => finish(true));
    sock.on('error', (e) => finish(true, e));
    const ms = requestMs;
    sock.setTimeout(ms, () => {
      done = true;
      sock.destroy();
      reject(new Error(`${method} ${path.slice(0, 200)}: no answer within ${ms} ms`));
    });
    sock.write(head);
    const pump = () => {
      while (!done && sent < buf.length) {
        const piece = buf.subarray(sent, sent + 65536);
        sent += piece.length;
        if (!sock.write(piece)) { sock.once('drain', pump); return; }
      }
    };
    pump();
  });
}

function finding(what, detail) {
  if (findings.length < MAX_FINDINGS) findings.push(`${what}: ${detail}`.slice(0, 800));
}

// The refusal text of an error body, or null when there is none.
function errorMessage(r) {
  const m = r.json?.error?.message;
  if (typeof m === 'string' && m.length) return m;
  return null;
}

// Checks one HTTP answer; returns false when it was a finding.
function checkHttp(what, r) {
  calls++;
  if (r.bad) { finding(what, `malformed answer: ${r.bad}`); return false; }
  if (r.status >= 500) { finding(what, `status ${r.status} ${r.text.slice(0, 300)}`); return false; }
  if (r.status >= 400 && r.text.length === 0) { finding(what, `status ${r.status} without a message`); return false; }
  if (r.status >= 400 && /json/.test(r.headers['content-type'] ?? '') && !errorMessage(r) && r.json?.error?.code === undefined) {
    finding(what, `status ${r.status} without an error message: ${r.text.slice(0, 300)}`);
    return false;
  }
  if (r.json?.error?.code === 'internal') { finding(what, `internal error: ${r.text.slice(0, 300)}`); return false; }
  return true;
}

// Checks a JSON-RPC answer: a result or an error with a message, and no
// internal error of either kind.
function checkRpc(what, msg) {
  if (msg === undefined || msg === null || typeof msg !== 'object') return finding(what, `no JSON-RPC answer: ${JSON.stringify(msg)}`);
  if (msg.error) {
    if (typeof msg.error.message !== 'string' || !msg.error.message) finding(what, `error without a message: ${JSON.stringify(msg)}`);
    if (msg.error.code === -32603) finding(what, `JSON-RPC internal error: ${JSON.stringify(msg).slice(0, 400)}`);
    return undefined;
  }
  if (!msg.result) return finding(what, `neither result nor error: ${JSON.stringify(msg).slice(0, 300)}`);
  if (msg.result.isError) {
    const text = (msg.result.content ?? []).map((c) => c.text).join('\n');
    if (!text) finding(what, `isError without a text: ${JSON.stringify(msg).slice(0, 300)}`);
    if (/^Error \(internal\)/.test(text)) finding(what, `tool internal error: ${text.slice(0, 400)}`);
  }
  return undefined;
}

// The JSON-RPC messages of an MCP answer (JSON or SSE).
function rpcMessages(r) {
  if (/^text\/event-stream/.test(r.headers['content-type'] ?? '')) {
    try { return sseMessages(r.text); } catch { return []; }
  }
  return r.json === null ? [] : [r.json];
}

function mcpHeaders(who) {
  const h = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'MCP-Protocol-Version': PROTOCOL };
  if (who.key) h['x-api-key'] = who.key;
  if (who.sid) h['Mcp-Session-Id'] = who.sid;
  return h;
}

// Sends one JSON-RPC request (text) and checks the answer.
async function mcp(what, who, text, id) {
  const r = await request('POST', '/v1/mcp', mcpHeaders(who), text).catch((e) => {
    throw new Error(`${e.message} (seed ${SEED}) in ${what}`);
  });
  if (!checkHttp(what, r) || r.status !== 200) return { r };
  const msg = rpcMessages(r).find((m) => m?.id === id);
  if (id !== undefined && msg === undefined) {
    finding(what, `no answer to id ${id}: ${r.text.slice(0, 300)}`);
    return { r };
  }
  checkRpc(what, msg ?? rpcMessages(r)[0]);
  return { r, msg };
}

async function openSessionOf(key) {
  const r = await request('POST', '/v1/mcp', mcpHeaders({ key }), JSON.stringify(initializeBody(1)));
  assert.equal(r.status, 200, r.text);
  const sid = r.headers['mcp-session-id'];
  const n = await request('POST', '/v1/mcp', mcpHeaders({ key, sid }),
    JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
  assert.equal(n.status, 202);
  return sid;
}

async function callTool(who, name, args, what = `tools/call ${name}`) {
  const id = rpcId++;
  return mcp(what, who, `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":${JSON.stringify(name)},"arguments":${enc(args)}}}`, id);
}

async function callOk(who, name, args) {
  const { r, msg } = await callTool(who, name, args);
  assert.ok(msg?.result && !msg.result.isError, `${name}: ${r.text.slice(0, 500)}`);
  return msg.result.structuredContent;
}

// Up, answering, and the process started at the beginning.
let pid;
async function assertUp(where) {
  assert.equal(aasd.proc.exitCode, null, `${where}: aasd exited (seed ${SEED}):\n${aasd.log().slice(-3000)}`);
  assert.equal(aasd.proc.pid, pid);
  const r = await request('GET', '/healthz');
  assert.equal(r.status, 200, `${where}: /healthz ${r.status} (seed ${SEED})`);
}

function assertNoFindings(what) {
  const n = findings.length;
  const list = findings.splice(0);
  assert.equal(n, 0, `${what}, seed ${SEED} (AAS_BLACKBOX_SEED=${SEED} replays it):\n${list.join('\n')}`);
}

// Pauses and snapshots of the own sandbox that took effect in the
// running test (see "What a seed costs" at the top).
let spent = { pause: 0, snapshot: 0 };
const BUDGET = { pause: OWN_PAUSES, snapshot: OWN_SNAPSHOTS };

// The sandbox id a generated pause or snapshot (kind, or null for any
// other call) may name: bob's instead of the own once the budget is spent.
function budgeted(kind, id) {
  return kind && id === ids.own && spent[kind] >= BUDGET[kind] ? ids.other : id;
}

// Makes CASES cases in order (the seed fixes them) and sends them
// PARALLEL at a time; a health check every BATCH. Prints how long they
// took and the slowest calls, which tell what a seed costs.
async function runCases(label, make, send) {
  spent = { pause: 0, snapshot: 0 };
  const t0 = Date.now();
  const slowest = [];
  for (let i = 0; i < CASES; i += PARALLEL) {
    const batch = [];
    for (let j = i; j < Math.min(CASES, i + PARALLEL); j++) batch.push(make(j));
    await Promise.all(batch.map(async (c) => {
      const c0 = Date.now();
      await send(c);
      slowest.push([Date.now() - c0, c.what.slice(0, 160)]);
      slowest.sort((x, y) => y[0] - x[0]).splice(5);
    }));
    const end = i + batch.length;
    if (Math.floor(end / BATCH) > Math.floor(i / BATCH)) await assertUp(`after ${label} case ${end - 1}`);
  }
  console.log(`${label}: ${CASES} cases in ${Date.now() - t0} ms, own sandbox paused ${spent.pause}, `
    + `snapshotted ${spent.snapshot} times; the slowest:\n${slowest.map(([ms, w]) => `  ${ms} ms ${w}`).join('\n')}`);
}

// ---- set-up ----

let tools;     // tools/list
let doc;       // the OpenAPI document
let bobBefore; // bob's sandbox as it was

before(async () => {
  console.log(`blackbox: seed ${SEED} (AAS_BLACKBOX_SEED), ${CASES} cases per test (AAS_BLACKBOX_CASES)`);
  // get_command may wait up to AAS_MAX_WAIT_SECONDS by design: kept well
  // under REQUEST_MS so that a generated wait_seconds is not taken for a hang.
  aasd = await startAasd(vmEnv('blackbox', { AAS_MAX_BODY_BYTES: String(BODY_LIMIT),
    AAS_MAX_ANON_BODY_BYTES: String(DRAIN_LIMIT), AAS_MAX_WAIT_SECONDS: '15' }));
  pid = aasd.proc.pid;
  alice = await newAccount();
  bob = await newAccount();
  carol = await newAccount({ credit: 0 });
  for (const a of [alice, bob, carol]) a.sid = await openSessionOf(a.api_key);
  alice.who = { key: alice.api_key, sid: alice.sid };
  bob.who = { key: bob.api_key, sid: bob.sid };
  carol.who = { key: carol.api_key, sid: carol.sid };
  const list = await mcp('tools/list', alice.who, '{"jsonrpc":"2.0","id":1,"method":"tools/list"}', 1);
  tools = list.msg.result.tools;
  doc = (await request('GET', '/v1/openapi.json')).json;
  ids = { own: null, other: null, random: () => `sbx-${Array.from({ length: 16 }, () => pick([...'abcdefghijklmnopqrstuvwxyz0123456789'])).join('')}` };
  // The two sandboxes come from generated, valid create arguments: one
  // over REST for alice, one over MCP for bob.
  requestMs = BOOT_MS;
  const createSchema = tools.find((t) => t.name === 'create_sandbox').inputSchema;
  // (Never from a snapshot: none exists yet.)
  const fresh = () => { const a = valid(createSchema); delete a.from_snapshot; return a; };
  // Both boot at once (each boot waits on its guest much of the time).
  const argsA = { ...fresh(), size: 'small', timeout_minutes: 30 };
  const argsB = { ...fresh(), size: 'small', timeout_minutes: 30 };
  // Both ids are kept before either is judged: after() destroys what was made.
  const [a, b] = await Promise.allSettled([
    request('POST', '/v1/sandboxes', { 'x-api-key': alice.api_key, 'Content-Type': 'application/json' }, enc(argsA)),
    callOk(bob.who, 'create_sandbox', argsB)]);
  if (a.value?.status === 201) ids.own = a.value.json.sandbox_id;
  if (b.status === 'fulfilled') ids.other = b.value.sandbox_id;
  if (a.status === 'rejected') throw a.reason;
  assert.equal(a.value.status, 201, `create ${enc(argsA)}: ${a.value.text}`);
  if (b.status === 'rejected') throw b.reason;
  bobBefore = b.value;
  requestMs = REQUEST_MS;
  const c = await callOk(alice.who, 'run_command', { sandbox_id: ids.own, command: 'true', background: true });
  if (c?.command_id) cmdIds.push(c.command_id);
  assertNoFindings('set-up');
});

after(async () => {
  for (const [who, id] of [[alice, ids?.own], [bob, ids?.other]]) {
    if (id) await request('DELETE', `/v1/sandboxes/${id}`, { 'x-api-key': who.api_key }).catch(() => {});
  }
  await aasd?.stop();
});

// ---- the tests ----

test('MCP: every tool with generated arguments, with a key, anonymously and without a session', async () => {
  const anonSid = await openSessionOf(null);
  const stats = {};
  await runCases('MCP', (i) => {
    const tool = pick(tools);
    // Creates go to the account without credit: valid ones are refused
    // after validation and the locks, and no VM is made.
    const owner = tool.name === 'create_sandbox' ? carol : alice;
    const { args, faults } = generate(tool.inputSchema, tool.name !== 'destroy_sandbox');
    const kind = { pause_sandbox: 'pause', snapshot_sandbox: 'snapshot' }[tool.name];
    if (args?.sandbox_id !== budgeted(kind, args?.sandbox_id)) {
      args.sandbox_id = ids.other;
      faults.push(`${kind}s spent`);
    }
    const mode = chance(0.85) ? 'key' : pick(['anon', 'nosession']);
    const who = mode === 'key' ? owner.who : (mode === 'anon' ? { sid: anonSid } : { key: owner.api_key });
    return { tool, kind, args, who, what: `case ${i} ${tool.name} ${mode} [${faults.join(', ')}] ${enc(args).slice(0, 300)}` };
  }, async ({ tool, kind, args, who, what }) => {
    const { r, msg } = await callTool(who, tool.name, args, what);
    const res = msg?.error ? 'rpc-error' : (msg?.result?.isError ? 'refused' : (msg ? 'ok' : `http ${r.status}`));
    stats[res] = (stats[res] ?? 0) + 1;
    if (kind && res === 'ok' && args?.sandbox_id === ids.own) spent[kind]++;
    if (msg?.result?.structuredContent?.command_id) cmdIds.push(msg.result.structuredContent.command_id);
    if (tool.name === 'create_sandbox' && res === 'ok') finding(what, `made a sandbox without credit: ${JSON.stringify(msg).slice(0, 300)}`);
    if (res === 'ok' && args?.sandbox_id === ids.other) finding(what, `another account's sandbox reached: ${JSON.stringify(msg).slice(0, 300)}`);
  });
  console.log(`MCP tools: ${CASES} calls, ${JSON.stringify(stats)}`);
  await assertUp('after the MCP calls');
  assertNoFindings('MCP tool calls');
});

test('MCP: malformed envelopes, JSON bodies and headers get a clear answer', async () => {
  const w = alice.who;
  const envelopes = [
    '', ' ', 'null', '[]', '{}', '[{}]', '1', '"x"', 'true', '{"jsonrpc":"2.0",', '{"jsonrpc":"2.0"}x', '\ufeff{}',
    '{"jsonrpc":"1.0","id":1,"method":"tools/list"}', '{"id":1,"method":"tools/list"}',
    '{"jsonrpc":"2.0","id":{},"method":"tools/list"}', '{"jsonrpc":"2.0","id":[1],"method":"tools/list"}',
    '{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}', '{"jsonrpc":"2.0","id":1e400,"method":"tools/list"}',
    '{"jsonrpc":"2.0","id":99999999999999999999999,"method":"tools/list"}', '{"jsonrpc":"2.0","id":true,"method":"tools/list"}',
    '{"jsonrpc":"2.0","id":null,"method":"tools/list"}', '{"jsonrpc":"2.0","id":"\\u0000","method":"tools/list"}',
    '{"jsonrpc":"2.0","id":1}', '{"jsonrpc":"2.0","id":1,"method":7}', '{"jsonrpc":"2.0","id":1,"method":""}',
    '{"jsonrpc":"2.0","id":1,"method":"tools/list\\u0000"}', `{"jsonrpc":"2.0","id":1,"method":"${'m'.repeat(100000)}"}`,
    '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[]}', '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":"x"}',
    '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":7}}',
    '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"\\ud800"}}',
    '[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"ping"}]',
    '{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}', '{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/list"}',
    '{"jsonrpc":"2.0","id":1,"method":"resources/list"}', '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}',
    '{"jsonrpc":"2.0","id":1,"method":"initialize"}', '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{}}}',
    '{"jsonrpc":"2.0","method":"notifications/unknown"}', '{"jsonrpc":"2.0","id":1,"result":{}}', '{"jsonrpc":"2.0","id":1,"error":{}}',
    '{"jsonrpc":"2.0","id":1,"method":"tools/call"}', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}',
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7}}', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope"}}',
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_usage\\u0000"}}',
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_usage","arguments":[]}}',
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_usage","arguments":"{}"}}',
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_usage","arguments":null}}',
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_usage","_meta":{"progressToken":{}}}}',
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_usage","_meta":{"progressToken":1e400}}}',
    `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_usage","arguments":${'['.repeat(10000)}${']'.repeat(10000)}}}`,
    `{"jsonrpc":"2.0","id":1,"method":"ping","params":${'{"a":'.repeat(10000)}1${'}'.repeat(10000)}}`,
    `{"jsonrpc":"2.0","id":1,"method":"tools/list${BAD_UTF8}"}`, `{"jsonrpc":"2.0","id":"${BAD_UTF8}","method":"ping"}`,
    `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_usage","arguments":{"cursor":"${BAD_UTF8}"}}}`,
    `{"jsonrpc":"2.0","id":1,"method":"ping","pad":"${'x'.repeat(BODY_LIMIT)}"}`,
  ];
  // And random ones: a valid call cut short, bytes flipped or added.
  const good = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_usage","arguments":{"limit":1}}}';
  for (let i = 0; i < Math.min(CASES, 200); i++) {
    const b = Buffer.from(good);
    const k = int(3);
    if (k === 0) envelopes.push(b.subarray(0, int(b.length)));
    else if (k === 1) { for (let j = 0; j <= int(4); j++) b[int(b.length)] = int(256); envelopes.push(b); }
    else { const at = int(b.length); envelopes.push(Buffer.concat([b.subarray(0, at), Buffer.from(pick(['\u0000', '\\', '"', '{', ']', ',', '\\u', 'é'])), b.subarray(at)])); }
  }
  for (const [i, body] of envelopes.entries()) {
    const text = Buffer.isBuffer(body) ? body.toString('latin1') : body;
    await mcp(`envelope ${i}: ${JSON.stringify(text.slice(0, 120))}`, w, body, undefined);
    if (i % BATCH === BATCH - 1) await assertUp(`after envelope ${i}`);
  }
  // Headers: wrong types, versions and sessions.
  const body = '{"jsonrpc":"2.0","id":5,"method":"tools/list"}';
  const hdrs = [
    { 'Content-Type': 'text/plain' }, { 'Content-Type': '' }, { Accept: 'text/html' }, { Accept: '' },
    { 'MCP-Protocol-Version': '1999-01-01' }, { 'MCP-Protocol-Version': '' }, { 'MCP-Protocol-Version': 'x'.repeat(5000) },
    { 'Mcp-Session-Id': 'nope' }, { 'Mcp-Session-Id': 'x'.repeat(5000) }, { 'Mcp-Session-Id': bob.sid },
    { 'x-api-key': 'aas_' + 'x'.repeat(60) }, { 'x-api-key': 'x'.repeat(8000) }, { Authorization: 'Bearer' },
    { Authorization: 'Basic Zm9vOmJhcg==' }, { Authorization: `Bearer ${alice.api_key}`, 'x-api-key': bob.api_key },
  ];
  for (const [i, h] of hdrs.entries()) {
    const r = await request('POST', '/v1/mcp', { ...mcpHeaders(w), ...h }, body);
    if (checkHttp(`header set ${i} ${JSON.stringify(h).slice(0, 100)}`, r) && r.status === 200) {
      checkRpc(`header set ${i}`, rpcMessages(r).find((x) => x?.id === 5));
    }
  }
  for (const method of ['GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
    const r = await request(method, '/v1/mcp', { ...mcpHeaders({ key: alice.api_key, sid: 'nope' }) });
    checkHttp(`${method} /v1/mcp`, r);
  }
  console.log(`MCP envelopes: ${envelopes.length} bodies, ${hdrs.length} header sets`);
  await assertUp('after the envelopes');
  assertNoFindings('malformed MCP requests');
});

// Path ids: another account's, names nothing, malformed in many ways.
const ODD_IDS = ['not-a-uuid', '123e4567-e89b-12d3-a456-426614174000', `sbx-${'a'.repeat(5000)}`, '%00', 'sbx-%00aaaaaaaaaaaaaaa',
  '..', '.', '%2e%2e', '%2F', 'sbx-0123456789ABCDEF', '%ZZ', '%', 'sbx-0123456789abcde%C3%A9', '%ff%fe', '%20', 'a;b', '*'];

function pathFor(template, forDelete) {
  let p = template;
  const sbxPick = chance(0.5) && !forDelete ? ids.own : pick([ids.other, ids.random(), ...ODD_IDS]);
  p = p.replace('{sandbox_id}', sbxPick);
  p = p.replace('{command_id}', chance(0.4) && cmdIds.length ? pick(cmdIds) : pick(['cmd-0000000000000000', ...ODD_IDS]));
  p = p.replace('{snapshot_id}', pick(['snp-0000000000000000', ...ODD_IDS]));
  return p;
}

// Percent-encoded; a lone surrogate as the bytes of one.
function pct(v) {
  try { return encodeURIComponent(v); } catch { return `${encodeURIComponent(v.replace(/[\ud800-\udfff]/g, ''))}%ed%a0%80`; }
}

function queryFor(params, validOnly = false) {
  const parts = [];
  for (const p of params.filter((x) => x.in === 'query')) {
    if (!p.required && chance(0.5)) continue;
    let v = validOnly || chance(0.6) ? valid(p.schema, p.name) : hostile(p.schema);
    v = v instanceof Raw ? v.text : (typeof v === 'string' ? v : enc(v));
    const e = validOnly || chance(0.8) ? pct(v) : pick(['%00', '%', '%zz', '%ff', '+', '&', '=', v.replace(/[^\x21-\x7e]/g, '')]);
    parts.push(`${encodeURIComponent(p.name)}=${e}`);
    if (!validOnly && chance(0.05)) parts.push(`${encodeURIComponent(p.name)}=${e}`);
  }
  if (!validOnly && chance(0.1)) parts.push(pick(['unknown=1', 'key=abc', 'api_key=x', '=', '&&', 'a', `x=${'y'.repeat(9000)}`]));
  return parts.length ? `?${parts.join('&')}` : '';
}

function restBody(op) {
  if (op.raw) {
    const n = pick([0, 1, 100, 65536, BODY_LIMIT + 1]);
    const b = Buffer.alloc(n);
    for (let i = 0; i < Math.min(n, 4096); i++) b[i] = int(256);
    return { body: b, faults: [`${n} raw bytes`] };
  }
  if (!op.body) return chance(0.1) ? { body: pick(['x', '{}', deep(100).text]), faults: ['unexpected body'] } : { faults: [] };
  if (chance(0.1)) return { body: pick(['', '{', 'null', '[]', '{"a":1}x', `{"x":"${BAD_UTF8}"}`, deep(10000).text, 'x'.repeat(BODY_LIMIT + 1)]), faults: ['malformed body'] };
  const { args, faults } = generate(op.body);
  return { body: enc(args), faults };
}

test('REST: every route with generated bodies, queries and odd path ids', async () => {
  const ops = [...operations(doc)];
  assert.ok(ops.length > 5);
  const stats = {};
  await runCases('REST', (i) => {
    const op = pick(ops);
    const creating = op.method === 'POST' && op.template === '/v1/sandboxes';
    const owner = creating ? carol : alice;
    const kind = op.method === 'POST' ? { pause: 'pause', snapshots: 'snapshot' }[op.template.split('/').pop()] : undefined;
    let path = pathFor(op.template, op.method === 'DELETE') + queryFor(op.params);
    if (kind && path.includes(ids.own) && budgeted(kind, ids.own) !== ids.own) path = path.split(ids.own).join(ids.other);
    const { body, faults } = restBody(op);
    const auth = pick(['key', 'key', 'key', 'key', 'key', 'key', 'none', 'bad', 'bearer']);
    const headers = {
      key: { 'x-api-key': owner.api_key }, none: {}, bad: { 'x-api-key': 'aas_nope' },
      bearer: { Authorization: `Bearer ${owner.api_key}` },
    }[auth];
    if (body !== undefined) headers['Content-Type'] = op.raw ? 'application/octet-stream' : pick(['application/json', 'text/plain', 'application/json; charset=latin1']);
    const what = `case ${i} ${op.method} ${path.slice(0, 200)} ${auth} [${faults.join(', ')}] ${typeof body === 'string' ? body.slice(0, 200) : ''}`;
    return { op, kind, creating, path, headers, body, what };
  }, async ({ op, kind, creating, path, headers, body, what }) => {
    const r = await request(op.method, path, headers, body).catch((e) => {
      throw new Error(`${e.message} (seed ${SEED}) in ${what}`);
    });
    checkHttp(what, r);
    stats[r.status] = (stats[r.status] ?? 0) + 1;
    if (kind && r.status >= 200 && r.status < 300 && path.includes(ids.own)) spent[kind]++;
    if (creating && r.status >= 200 && r.status < 300) finding(what, `made a sandbox without credit: ${r.text.slice(0, 200)}`);
    // alice's answers never show bob's sandbox.
    if (r.status >= 200 && r.status < 300 && (r.text.includes(ids.other) || path.includes(ids.other))) finding(what, `another account's sandbox shown: ${r.text.slice(0, 300)}`);
    if (r.json?.command_id) cmdIds.push(r.json.command_id);
  });
  // Paths and methods no route has.
  for (const [m, p] of [['GET', '/'], ['GET', '/v1'], ['GET', '/v1/'], ['POST', '/v1/info'], ['GET', '/v1/sandboxes/'],
    ['GET', '//v1/usage'], ['GET', '/v1/usage/'], ['GET', '/v1/%00'], ['GET', `/v1/${'a'.repeat(10000)}`], ['GET', '/v1/../v1/info'],
    ['PATCH', '/v1/sandboxes'], ['GET', '/v1/sandboxes/x/y/z/w'], ['GET', '/v1/info?%'], ['GET', '/healthz?x=%00']]) {
    checkHttp(`${m} ${p.slice(0, 100)}`, await request(m, p, { 'x-api-key': alice.api_key }));
  }
  console.log(`REST: ${CASES} requests, statuses ${JSON.stringify(stats)}`);
  await assertUp('after the REST calls');
  assertNoFindings('REST requests');
});

// What an answer says once the id in it is a placeholder, and the
// request id is out.
function normal(x, id) {
  return JSON.stringify(x).split(id).join('<id>').replace(/"id":\d+/g, '"id":0');
}

test("another account's sandbox answers exactly as one that does not exist, and is untouched", async () => {
  let compared = 0;
  for (const tool of tools) {
    if (!tool.inputSchema.properties?.sandbox_id) continue;
    for (let i = 0; i < 3; i++) {
      const args = valid(tool.inputSchema, '', false);
      const nobody = ids.random();
      const a = await callTool(alice.who, tool.name, { ...args, sandbox_id: ids.other });
      const b = await callTool(alice.who, tool.name, { ...args, sandbox_id: nobody });
      assert.ok(a.msg?.result?.isError || a.msg?.error, `${tool.name} on bob's sandbox: ${a.r.text.slice(0, 300)}`);
      assert.equal(normal(a.msg, ids.other), normal(b.msg, nobody), `${tool.name} ${enc(args).slice(0, 200)}`);
      compared++;
    }
  }
  for (const op of operations(doc)) {
    if (!op.template.includes('{sandbox_id}')) continue;
    for (let i = 0; i < 3; i++) {
      const q = queryFor(op.params, true);
      const cmd = chance(0.5) && cmdIds.length ? pick(cmdIds) : 'cmd-0000000000000000';
      const at = (id) => op.template.replace('{sandbox_id}', id).replace('{command_id}', cmd) + q;
      const { body } = op.raw ? { body: 'hello' } : (op.body ? { body: enc(valid(op.body, '', false)) } : {});
      const headers = { 'x-api-key': alice.api_key, ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}) };
      const nobody = ids.random();
      const a = await request(op.method, at(ids.other), headers, body);
      const b = await request(op.method, at(nobody), headers, body);
      checkHttp(`${op.method} ${at(ids.other)}`, a);
      assert.ok(a.status >= 400, `${op.method} ${op.template} on bob's sandbox: ${a.status} ${a.text.slice(0, 300)}`);
      assert.equal(`${a.status} ${a.text.split(ids.other).join('<id>')}`, `${b.status} ${b.text.split(nobody).join('<id>')}`,
        `${op.method} ${op.template}`);
      compared++;
    }
  }
  console.log(`cross-account: ${compared} answers compared`);
  const now = await callOk(bob.who, 'get_sandbox', { sandbox_id: ids.other });
  assert.equal(now.state, 'running');
  assert.equal(now.expires_at, bobBefore.expires_at, "bob's sandbox was extended");
  assert.equal(await psql(`select count(*) from sandbox_commands where sandbox_id = '${ids.other}'`), '0');
  assert.equal(await psql(`select count(*) from sandbox_ports where sandbox_id = '${ids.other}'`), '0');
  assert.equal(await psql(`select count(*) from ledger where account_id = '${bob.account_id}'`), '2', 'grant and one charge');
  assertNoFindings('cross-account requests');
});

test('afterwards: the same aasd is up, every ledger sums to its balance, and no VM is left', async () => {
  await assertUp('at the end');
  for (const [who, id] of [[alice, ids.own], [bob, ids.other]]) {
    const r = await request('DELETE', `/v1/sandboxes/${id}`, { 'x-api-key': who.api_key });
    assert.equal(r.status, 200, r.text);
  }
  const mine = `'${alice.account_id}', '${bob.account_id}', '${carol.account_id}'`;
  let left;
  for (let i = 0; i < 150; i++) {
    left = await psql(`select count(*) from sandboxes where account_id in (${mine})
      and (state in ('creating', 'running', 'destroying') or settled_at is null)`);
    if (left === '0') break;
    await sleep(200);
  }
  assert.equal(left, '0', 'sandboxes left live or unsettled');
  const rows = (await psql(`select id from sandboxes where account_id in (${mine})`)).split('\n').filter(Boolean);
  assert.equal(rows.length, 2, `sandboxes made: ${rows.join(', ')}`);
  let vms;
  for (let i = 0; i < 100; i++) {
    vms = (await qemuIds()).filter((v) => rows.includes(v));
    if (vms.length === 0) break;
    await sleep(200);
  }
  assert.deepEqual(vms, [], 'VMs left');
  assert.equal(await psql(`select count(*) from accounts a where balance <>
    (select coalesce(sum(amount), 0) from ledger l where l.account_id = a.id)`), '0', 'an account whose ledger is not its balance');
  await assertUp('after the destroys');
  // A refusal is logged at info; an error line is a fault on aasd's side.
  const errors = aasd.log().split('\n').filter((l) => /^\S+ (error|fatal) /.test(l));
  assert.deepEqual(errors.slice(0, 10), [], `error lines in aasd's log (seed ${SEED})`);
  console.log(`blackbox: ${calls} requests checked, seed ${SEED}`);
});
