// Noisy-neighbour benchmark (make bench): account B's calls on an idle
// service vs the same calls while account A uses everything it is allowed,
// same aasd, same run.
//   B's calls: tools/list, get_usage and run_command `true` over one MCP
//   session with B's key, interleaved; p50 and p99 each (target: noisy
//   within 2x of idle).
//   A's load: run_command `sleep 600` up to its calls in flight plus a full
//   queue plus more (answered 429 busy, retried after Retry-After),
//   background commands up to the sandbox's cap, MCP sessions up to the
//   account's cap, GET streams and held preview connections until refused
//   (each at most BENCH_NOISY_STREAMS / BENCH_NOISY_PREVIEWS), and a CPU
//   burn (`yes > /dev/null`) in A's guest. B is measured with the burn, then
//   again without it: under TCG the burning guest takes a host core from B's
//   VM, which is not the service's doing.
// Usage: node bench/noisy.mjs BUILD_DIR STATE_DIR
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { sleep, pct, startVmAasd } from './lib.mjs';

const run = promisify(execFile);
const [BUILD, STATE] = process.argv.slice(2);
const N_LIST = Number(process.env.BENCH_NOISY_LIST || 200);
const N_USAGE = Number(process.env.BENCH_NOISY_USAGE || 200);
const N_EXEC = Number(process.env.BENCH_NOISY_EXEC || 80);
const MAX_STREAMS = Number(process.env.BENCH_NOISY_STREAMS || 256);
const MAX_PREVIEWS = Number(process.env.BENCH_NOISY_PREVIEWS || 256);
const SESSIONS_CAP = Number(process.env.BENCH_NOISY_SESSIONS || 32);
// Commands A keeps sent beyond its calls in flight and its queue.
const EXTRA_CALLS = Number(process.env.BENCH_NOISY_EXTRA_CALLS || 8);
const ROOT = `${STATE}/libvirt-bench-noisy`;
const URI = `qemu:///embed?root=${ROOT}`;
const DB = `postgresql:///aas?host=${STATE}/run&user=aas`;
const IMAGE = process.env.AAS_IMAGE_DIR || `${STATE}/../images/current`;
const PROTOCOL = '2025-11-25';
const GUEST_PORT = 8000;
// A's refused calls are logged as warnings, hundreds of them.
const ENV = { AAS_MAX_SESSIONS_PER_ACCOUNT: String(SESSIONS_CAP), AAS_LOG_LEVEL: 'error' };

const f1 = (x) => x.toFixed(1);

// The value aasd runs with for a setting: the environment given here, else
// the default its configuration table prints.
async function setting(name) {
  if (ENV[name] !== undefined) return Number(ENV[name]);
  const { stdout } = await run(`${BUILD}/aasd`, ['--config-table']);
  const row = stdout.split('\n').find((l) => l.startsWith(`| \`${name}\``));
  if (!row) throw new Error(`${name} is not in aasd --config-table`);
  return Number(row.split('|')[2].trim().replace(/`/g, ''));
}

// One HTTP request; resolves with { status, headers, text } once the body
// has ended. `agent` false opens a connection of its own.
function request(url, { method = 'GET', headers = {}, body, agent = false, timeoutMs = 0 } = {}) {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method, headers, agent }, (res) => {
      const chunks = [];
      res.on('data', (d) => chunks.push(d));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (timeoutMs) req.setTimeout(timeoutMs, () => req.destroy(new Error('timed out')));
    req.end(body);
  });
}

// A request whose answer is kept open (an SSE stream, a held preview): resolves
// with { status, close } once the response head arrived; the body is drained.
function holdOpen(url, headers, timeoutMs = 20000) {
  return new Promise((resolve) => {
    const u = new URL(url);
    const req = http.request({ host: '127.0.0.1', port: u.port, path: u.pathname, method: 'GET', headers, agent: false }, (res) => {
      clearTimeout(t);
      res.on('error', () => {});
      if (res.statusCode !== 200) {
        res.resume();
        res.on('end', () => req.destroy());
      } else {
        res.resume();
      }
      resolve({ status: res.statusCode, close: () => req.destroy() });
    });
    const t = setTimeout(() => { req.destroy(); resolve({ status: 'no answer', close: () => {} }); }, timeoutMs);
    req.on('error', (e) => { clearTimeout(t); resolve({ status: e.code || e.message, close: () => {} }); });
    req.end();
  });
}

const bump = (m, k) => { m[k] = (m[k] || 0) + 1; };
const counts = (m) => Object.entries(m).map(([k, v]) => `${v}x ${k}`).join(', ') || 'none';

let aasd;
let keyA;
let ctlKey; // a second key of account A: setup steps and cleanup, never load
let sbxA;
let sbxB;
let keyB;
const held = []; // close() of every stream and preview A holds
let loadOn = false;
const loops = [];

const rest = async (key, method, p, body) => {
  const r = await request(`${aasd.url}${p}`, { method, headers: { 'x-api-key': key, ...(body ? { 'Content-Type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined });
  let json = null;
  try { json = JSON.parse(r.text); } catch { /* not JSON */ }
  return { ...r, json };
};
const restOk = async (key, method, p, body) => {
  const r = await rest(key, method, p, body);
  if (r.status >= 300) throw new Error(`${method} ${p}: ${r.status} ${r.text.slice(0, 200)}`);
  return r.json;
};

async function newAccount(tag) {
  const env = { ...process.env, AAS_STATE_DIR: STATE };
  const { stdout } = await run(`${BUILD}/aasctl`, ['account', 'create', '--email',
    `bench-noisy-${tag}-${randomBytes(4).toString('hex')}@bench.invalid`], { env });
  return JSON.parse(stdout);
}

// MCP over raw HTTP: one session, calls answered as JSON or as an SSE stream.
const mcpHeaders = (key, sid) => ({ 'x-api-key': key, 'Content-Type': 'application/json',
  Accept: 'application/json, text/event-stream', ...(sid ? { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL } : {}) });

async function initialize(key, agent = false) {
  const r = await request(`${aasd.url}/v1/mcp`, { method: 'POST', headers: mcpHeaders(key), agent, body: JSON.stringify({
    jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: 'aas-bench-noisy', version: '1' } } }) });
  const sid = r.headers['mcp-session-id'];
  if (r.status !== 200 || !sid) return { sid: null, status: r.status, text: r.text };
  const n = await request(`${aasd.url}/v1/mcp`, { method: 'POST', headers: mcpHeaders(key, sid), agent,
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
  if (n.status !== 202) throw new Error(`notifications/initialized: ${n.status}`);
  return { sid, status: r.status };
}

let rpcId = 10;
// One JSON-RPC call on a session; resolves with its result, throws on an
// error (HTTP, JSON-RPC or a tool error).
async function rpc(key, sid, agent, method, params) {
  const id = ++rpcId;
  const r = await request(`${aasd.url}/v1/mcp`, { method: 'POST', headers: mcpHeaders(key, sid), agent,
    body: JSON.stringify({ jsonrpc: '2.0', id, method, params }) });
  if (r.status !== 200) throw new Error(`${method}: HTTP ${r.status} ${r.text.slice(0, 200)}`);
  let msg;
  if (String(r.headers['content-type']).startsWith('text/event-stream')) {
    for (const line of r.text.split('\n')) {
      if (!line.startsWith('data:')) continue;
      const m = JSON.parse(line.slice(5));
      if (m.id === id) msg = m;
    }
  } else {
    msg = JSON.parse(r.text);
  }
  if (!msg) throw new Error(`${method}: no answer in the reply`);
  if (msg.error) throw new Error(`${method}: ${msg.error.message}`);
  if (msg.result?.isError) throw new Error(`${method}: ${msg.result.content[0].text}`);
  return msg.result;
}

// B's three calls, interleaved so drift hits each alike; latencies in ms
// and the calls that failed (counted, not timed).
async function measureB(label) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const { sid } = await initialize(keyB, agent);
  if (!sid) throw new Error(`B could not open a session (${label})`);
  const lat = { 'tools/list': [], get_usage: [], 'run_command true': [] };
  const failed = {};
  const calls = {
    'tools/list': () => rpc(keyB, sid, agent, 'tools/list', {}),
    get_usage: () => rpc(keyB, sid, agent, 'tools/call', { name: 'get_usage', arguments: {} }),
    'run_command true': async () => {
      const r = await rpc(keyB, sid, agent, 'tools/call', { name: 'run_command', arguments: { sandbox_id: sbxB, command: 'true' } });
      if (r.structuredContent.exit_code !== 0) throw new Error(`exit ${r.structuredContent.exit_code}`);
    },
  };
  const want = { 'tools/list': N_LIST, get_usage: N_USAGE, 'run_command true': N_EXEC };
  const rounds = Math.max(...Object.values(want));
  for (let i = 0; i < rounds; i++) {
    for (const [name, n] of Object.entries(want)) {
      // Spread the smaller series evenly over the rounds.
      if (Math.floor((i * n) / rounds) === Math.floor(((i + 1) * n) / rounds)) continue;
      const t0 = performance.now();
      try {
        await calls[name]();
        lat[name].push(performance.now() - t0);
      } catch (e) {
        bump(failed, `${name}: ${e.message.slice(0, 120)}`);
      }
    }
  }
  await request(`${aasd.url}/v1/mcp`, { method: 'DELETE', headers: mcpHeaders(keyB, sid), agent });
  agent.destroy();
  return { lat, failed };
}

// A's long commands: each loop keeps one `sleep 600` sent, sending again
// after an answer (Retry-After when busy). Statuses are counted.
const cmdStatus = {};
function startCommandLoops(n) {
  loadOn = true;
  for (let i = 0; i < n; i++) {
    loops.push((async () => {
      while (loadOn) {
        let r;
        try {
          r = await request(`${aasd.url}/v1/sandboxes/${sbxA}/commands`, { method: 'POST',
            headers: { 'x-api-key': keyA, 'Content-Type': 'application/json' },
            body: JSON.stringify({ command: 'sleep 600', timeout_seconds: 700 }) });
        } catch (e) {
          bump(cmdStatus, e.code || e.message);
          await sleep(1000);
          continue;
        }
        bump(cmdStatus, r.status === 429 ? '429 busy' : String(r.status));
        if (r.status === 429) await sleep(1000 * Number(r.headers['retry-after'] || 1));
      }
    })());
  }
}

// The guest's web server: /hold answers 200 at once, then one byte every
// five seconds for an hour (a preview connection held open), anything else
// a short 200.
const SERVER_PY = `
import http.server, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def log_message(self, *a):
        pass
    def do_GET(self):
        if self.path.startswith('/hold'):
            self.send_response(200)
            self.send_header('Content-Type', 'text/plain')
            self.send_header('Content-Length', '1000000')
            self.end_headers()
            try:
                for _ in range(720):
                    self.wfile.write(b'.')
                    self.wfile.flush()
                    time.sleep(5)
            except OSError:
                pass
            self.close_connection = True
            return
        body = b'ok\\n'
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
class S(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
S(('0.0.0.0', ${GUEST_PORT}), H).serve_forever()
`;

async function cleanup() {
  loadOn = false;
  for (const close of held.splice(0)) close();
  // Destroying A's sandbox ends the commands holding A's calls; the
  // control key has its own share of the work pool.
  if (sbxA && ctlKey) await rest(ctlKey, 'DELETE', `/v1/sandboxes/${sbxA}`).catch(() => {});
  if (sbxB && keyB) await rest(keyB, 'DELETE', `/v1/sandboxes/${sbxB}`).catch(() => {});
  await Promise.race([Promise.all(loops), sleep(60000)]);
}

async function liveSandboxes() {
  const ids = [sbxA, sbxB].filter(Boolean).map((s) => `'${s}'`).join(',');
  if (!ids) return 0;
  const { stdout } = await run('psql', [DB, '-tAc', `select count(*) from sandboxes where id in (${ids}) and state in ('creating', 'running', 'destroying')`]);
  return Number(stdout.trim());
}

// Stops aasd; SIGKILL when it has not stopped in a minute (its VMs live on
// and a fresh aasd takes them over).
async function stopAasd() {
  if (!aasd) return;
  const a = aasd;
  aasd = null;
  const stopped = a.stop();
  if (await Promise.race([stopped.then(() => true), sleep(60000).then(() => false)])) return;
  console.error('noisy: aasd did not stop within 60 s; killing it');
  a.kill();
  await stopped;
}

const startAasd = () => startVmAasd(BUILD, STATE, URI, IMAGE, ENV);

let rc = 0;
try {
  const calls = await setting('AAS_MAX_CALLS_PER_ACCOUNT');
  const queued = await setting('AAS_MAX_QUEUED_PER_ACCOUNT');
  const bgCap = await setting('AAS_MAX_BACKGROUND_PER_SANDBOX');
  aasd = await startAasd();
  const accA = await newAccount('a');
  const accB = await newAccount('b');
  keyA = accA.api_key;
  keyB = accB.api_key;
  const env = { ...process.env, AAS_STATE_DIR: STATE };
  ctlKey = JSON.parse((await run(`${BUILD}/aasctl`, ['key', 'create', '--account', accA.account_id, '--name', 'bench-control'], { env })).stdout).api_key;

  const [sa, sb] = await Promise.all([
    restOk(keyA, 'POST', '/v1/sandboxes', { size: 'small', timeout_minutes: 60 }),
    restOk(keyB, 'POST', '/v1/sandboxes', { size: 'small', timeout_minutes: 60 }),
  ]);
  sbxA = sa.sandbox_id;
  sbxB = sb.sandbox_id;
  await restOk(keyA, 'POST', `/v1/sandboxes/${sbxA}/commands`, { command: `cat > ~/hold.py <<'EOF'\n${SERVER_PY}\nEOF` });
  await restOk(keyA, 'POST', `/v1/sandboxes/${sbxA}/commands`, { command: 'exec python3 ~/hold.py', background: true, timeout_seconds: 3600 });
  await restOk(keyA, 'POST', `/v1/sandboxes/${sbxA}/ports`, { port: GUEST_PORT, public: true });
  const previewHost = `${GUEST_PORT}-${sbxA}.localhost:${aasd.port}`;
  for (let i = 0; ; i++) {
    const r = await request(`${aasd.url}/ok`, { headers: { host: previewHost } }).catch((e) => ({ status: e.message }));
    if (r.status === 200) break;
    if (i > 120) throw new Error(`A's preview never answered (${r.status})`);
    await sleep(500);
  }

  // Warm-up, then the idle baseline.
  {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const { sid } = await initialize(keyB, agent);
    for (let i = 0; i < 5; i++) {
      await rpc(keyB, sid, agent, 'tools/list', {});
      await rpc(keyB, sid, agent, 'tools/call', { name: 'get_usage', arguments: {} });
      await rpc(keyB, sid, agent, 'tools/call', { name: 'run_command', arguments: { sandbox_id: sbxB, command: 'true' } });
    }
    agent.destroy();
  }
  console.log(`noisy  B's calls per phase: tools/list n=${N_LIST}, get_usage n=${N_USAGE}, run_command true n=${N_EXEC} (interleaved, one MCP session)`);
  const idle = await measureB('idle');

  // A takes everything it is allowed. Calls that need A's key first: once
  // its long commands fill its share, A's own further calls wait or get 429.
  const bg = { started: 0, refused: {} };
  const bgRun = async (command) => {
    const r = await rest(keyA, 'POST', `/v1/sandboxes/${sbxA}/commands`, { command, background: true, timeout_seconds: 3600 });
    if (r.status === 202) { bg.started++; return true; }
    bump(bg.refused, `${r.status} ${r.json?.error?.message?.slice(0, 90) || r.text.slice(0, 90)}`);
    return false;
  };
  await bgRun('yes > /dev/null');
  for (let i = 0; i < bgCap + 16 && await bgRun('sleep 600'); i++);

  const sessions = [];
  const sessRefused = {};
  for (let i = 0; i < 256; i++) {
    const s = await initialize(keyA);
    if (s.sid) { sessions.push(s.sid); continue; }
    bump(sessRefused, `${s.status} ${s.text.slice(0, 140)}`);
    if (Object.values(sessRefused).reduce((a, b) => a + b, 0) >= 4) break;
  }

  // GET streams: on each session until refused; a session whose first
  // stream is refused means the account is full.
  let streams = 0;
  const streamRefused = {};
  for (const sid of sessions) {
    let first = true;
    while (streams < MAX_STREAMS) {
      const h = await holdOpen(`${aasd.url}/v1/mcp`, { 'x-api-key': keyA, Accept: 'text/event-stream', 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL });
      if (h.status === 200) { held.push(h.close); streams++; first = false; continue; }
      bump(streamRefused, String(h.status));
      break;
    }
    if (first || streams >= MAX_STREAMS) break;
  }

  // Preview connections held open, 16 at a time, until refused.
  let previews = 0;
  const previewRefused = {};
  while (previews < MAX_PREVIEWS && Object.keys(previewRefused).length === 0) {
    const batch = await Promise.all(Array.from({ length: Math.min(16, MAX_PREVIEWS - previews) }, () =>
      holdOpen(`${aasd.url}/hold`, { host: previewHost })));
    for (const h of batch) {
      if (h.status === 200) { held.push(h.close); previews++; } else { h.close(); bump(previewRefused, String(h.status)); }
    }
  }

  startCommandLoops(calls + queued + EXTRA_CALLS);
  // Until A's share is full: its extra commands are being refused.
  for (let i = 0; i < 100 && !cmdStatus['429 busy']; i++) await sleep(200);
  await sleep(2000);
  const { stdout: runningCmds } = await run('psql', [DB, '-tAc', `select count(*) from sandbox_commands where sandbox_id = '${sbxA}' and state = 'running'`]).catch(() => ({ stdout: '?' }));

  console.log(`noisy  A holds: ${calls + queued + EXTRA_CALLS} run_command 'sleep 600' kept sent (AAS_MAX_CALLS_PER_ACCOUNT=${calls} in flight, AAS_MAX_QUEUED_PER_ACCOUNT=${queued} queued, ${EXTRA_CALLS} more), ` +
    `${bg.started} background commands (1 of them 'yes > /dev/null'; AAS_MAX_BACKGROUND_PER_SANDBOX=${bgCap}), commands running in A's sandbox: ${runningCmds.trim()}`);
  console.log(`noisy  A holds: ${sessions.length} MCP sessions (AAS_MAX_SESSIONS_PER_ACCOUNT=${SESSIONS_CAP}), ${streams} GET streams (at most ${MAX_STREAMS} tried), ${previews} preview connections held open (at most ${MAX_PREVIEWS} tried)`);
  const noisyBurn = await measureB('noisy, CPU burn');
  const during = { ...cmdStatus };

  // The same load without the burn: the control key ends it and refills
  // the background slot it held once the service has seen it end.
  const killed = await restOk(ctlKey, 'POST', `/v1/sandboxes/${sbxA}/commands`, { command: 'pkill -x yes; sleep 1; pgrep -x yes >/dev/null && echo still burning || echo ended' });
  let refilled = false;
  for (let i = 0; i < 30 && !refilled; i++) {
    const r = await rest(ctlKey, 'POST', `/v1/sandboxes/${sbxA}/commands`, { command: 'sleep 600', background: true, timeout_seconds: 3600 });
    refilled = r.status === 202;
    if (!refilled) await sleep(1000);
  }
  console.log(`noisy  CPU burn in A's guest: ${String(killed.stdout).trim()}; its background slot ${refilled ? 'refilled with sleep 600' : 'not yet free after 30 s (one slot short)'}`);
  const noisy = await measureB('noisy, no CPU burn');

  console.log(`noisy  A refused: background ${counts(bg.refused)}; sessions ${counts(sessRefused)}; streams ${counts(streamRefused)}; previews ${counts(previewRefused)}`);
  console.log(`noisy  A's run_command 'sleep 600' answers while measured: ${counts(during)}; in all: ${counts(cmdStatus)}`);
  const row = (name, base, load) => {
    const i50 = pct(base.lat[name], 0.5), i99 = pct(base.lat[name], 0.99);
    const n50 = pct(load.lat[name], 0.5), n99 = pct(load.lat[name], 0.99);
    const r50 = n50 / i50, r99 = n99 / i99;
    const ok = r50 <= 2 && r99 <= 2 ? 'yes' : 'NO';
    return `| ${name} | ${f1(i50)} / ${f1(i99)} | ${f1(n50)} / ${f1(n99)} | ${r50.toFixed(2)}x / ${r99.toFixed(2)}x | ${ok} |`;
  };
  for (const [label, load] of [['A noisy with the CPU burn in its guest', noisyBurn], ['A noisy, no CPU burn', noisy]]) {
    console.log(`\nnoisy  B's calls, idle vs ${label} (ms, p50 / p99; target within 2x)`);
    console.log('| call | idle p50 / p99 | noisy p50 / p99 | ratio p50 / p99 | within 2x |');
    console.log('|---|---|---|---|---|');
    for (const name of Object.keys(idle.lat)) console.log(row(name, idle, load));
  }
  for (const [label, r] of [['idle', idle], ['noisy, CPU burn', noisyBurn], ['noisy, no burn', noisy]]) {
    if (Object.keys(r.failed).length) console.log(`noisy  B's FAILED calls (${label}): ${counts(r.failed)}`);
  }
} catch (e) {
  console.error(`noisy: ${e.stack || e}`);
  rc = 1;
} finally {
  try {
    if (aasd) await cleanup();
    await stopAasd();
    // Anything still alive (a failed cleanup): a fresh aasd destroys it.
    if (await liveSandboxes()) {
      console.error('noisy: sandboxes left after cleanup; destroying them with a fresh aasd');
      aasd = await startAasd();
      if (sbxA && ctlKey) await rest(ctlKey, 'DELETE', `/v1/sandboxes/${sbxA}`);
      if (sbxB && keyB) await rest(keyB, 'DELETE', `/v1/sandboxes/${sbxB}`);
      await stopAasd();
      if (await liveSandboxes()) { console.error('noisy: sandboxes still alive'); rc = 1; }
    }
  } catch (e) {
    console.error(`noisy: cleanup: ${e.stack || e}`);
    rc = 1;
  }
}
process.exit(rc);
