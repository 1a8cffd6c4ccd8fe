// Egress to the operator's network, with a real VM (TCG). Two network
// namespaces of this run: one stands in for the internet (a private range,
// so reachable only because AAS_NET_ALLOW names it), the other for the
// operator's own network (databases, other hosts), which a sandbox with
// internet must not reach. Both live in 10.99.0.0/16; tests/net-safety.sh
// drops anything else QEMU sends, so nothing leaves this machine.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startAasd, newAccount, vmEnv, sleep, BUILD, TEST_NET_ALLOW } from './lib/harness.mjs';

const run = promisify(execFile);
const PORT = 8080;
// Per run: names and subnets of their own, so parallel runs do not meet.
// The internet inside TEST_NET_ALLOW (10.99.0.0/17), the operator's
// network in the upper half of 10.99.0.0/16, outside it.
const tag = process.pid % 100000;
const slot = process.pid % 100;
const NETS = {
  inet: { ns: `aas-eg-inet-${tag}`, host: `egi${tag}a`, peer: `egi${tag}b`, net: `10.99.${slot + 20}` },
  op: { ns: `aas-eg-op-${tag}`, host: `ego${tag}a`, peer: `ego${tag}b`, net: `10.99.${slot + 148}` },
};
const servers = [];

let aasd;
let client;
let sbx;

async function ok(name, args) {
  const r = await client.callTool({ name, arguments: args }, undefined, { timeout: 300000 });
  assert.ok(!r.isError, `${name}: ${r.content?.[0]?.text}`);
  return r.structuredContent;
}

async function sh(command) {
  return ok('run_command', { sandbox_id: sbx, command, timeout_seconds: 60 });
}

// curl from inside the sandbox: what it printed, its exit code and how long it took.
async function probe(url, maxTime = 20) {
  const r = await sh(`s=$(date +%s%N); curl -sS -m ${maxTime} ${url} 2>&1; rc=$?; `
    + 'e=$(date +%s%N); echo; echo "rc=$rc ms=$(( (e - s) / 1000000 ))"');
  const m = /rc=(\d+) ms=(\d+)\s*$/.exec(r.stdout);
  assert.ok(m, r.stdout);
  return { out: r.stdout, rc: Number(m[1]), ms: Number(m[2]) };
}

async function ip(...args) {
  await run('ip', args);
}

async function removeNets() {
  for (const n of Object.values(NETS)) {
    await run('ip', ['netns', 'del', n.ns]).catch(() => {});
    await run('ip', ['link', 'del', n.host]).catch(() => {});
  }
}

async function addNet(n, answer) {
  await ip('netns', 'add', n.ns);
  await ip('link', 'add', n.host, 'type', 'veth', 'peer', 'name', n.peer);
  await ip('link', 'set', n.peer, 'netns', n.ns);
  await ip('addr', 'add', `${n.net}.1/24`, 'dev', n.host);
  await ip('link', 'set', n.host, 'up');
  await ip('netns', 'exec', n.ns, 'ip', 'addr', 'add', `${n.net}.2/24`, 'dev', n.peer);
  await ip('netns', 'exec', n.ns, 'ip', 'link', 'set', n.peer, 'up');
  await ip('netns', 'exec', n.ns, 'ip', 'link', 'set', 'lo', 'up');
  servers.push(spawn('ip', ['netns', 'exec', n.ns, process.execPath, '-e',
    `require('http').createServer((q, s) => s.end('${answer}')).listen(${PORT}, '${n.net}.2')`],
  { stdio: 'ignore' }));
  // From the host (root, not the QEMU user) the listener answers: the
  // probes from the sandbox below are not vacuous.
  const deadline = Date.now() + 20000;
  for (;;) {
    const r = await run('curl', ['-s', '-m', '2', `http://${n.net}.2:${PORT}/`]).catch(() => null);
    if (r?.stdout === answer) return;
    if (Date.now() > deadline) throw new Error(`${n.ns}: listener did not answer`);
    await sleep(200);
  }
}

before(async () => {
  await removeNets();
  await addNet(NETS.inet, 'internet-ok');
  await addNet(NETS.op, 'operator-secret');
  aasd = await startAasd(vmEnv('egress'));
  const key = (await newAccount()).api_key;
  const transport = new StreamableHTTPClientTransport(new URL(aasd.mcpUrl),
    { requestInit: { headers: { 'x-api-key': key } } });
  client = new Client({ name: 'aas-egress-e2e', version: '1.0.0' });
  await client.connect(transport);
  const s = await ok('create_sandbox', { timeout_minutes: 30 });
  assert.equal(s.network, 'nat');
  sbx = s.sandbox_id;
});

after(async () => {
  if (sbx) await client.callTool({ name: 'destroy_sandbox', arguments: { sandbox_id: sbx } }).catch(() => {});
  await client?.close().catch(() => {});
  try {
    await aasd?.stop();
  } finally {
    for (const p of servers) p.kill();
    await removeNets();
  }
});

test('the isolation rule refuses private ranges and accepts the allow-list first', async () => {
  const { stdout } = await run('nft', ['list', 'table', 'inet', 'aas_guard']);
  const lines = stdout.split('\n');
  const accept = lines.findIndex((l) => l.includes(`ip daddr ${TEST_NET_ALLOW} ct state new`) && /accept$/.test(l));
  const deny = lines.findIndex((l) => /ip daddr \{ 10\.0\.0\.0\/8, 100\.64\.0\.0\/10, 172\.16\.0\.0\/12, 192\.168\.0\.0\/16 \} ct state new meta l4proto tcp .*reject with tcp reset/.test(l));
  assert.ok(accept > 0, stdout);
  assert.ok(deny > accept, stdout);
  assert.match(stdout, /ip6 daddr fc00::\/7 ct state new meta l4proto tcp .*reject with tcp reset/);
  // What an operator pastes on another hypervisor host says the same.
  const { stdout: printed } = await run(path.join(BUILD, 'aasd'), ['--netguard-rules'],
    { env: { PATH: process.env.PATH, AAS_NET_ALLOW: `${TEST_NET_ALLOW},fd12:3456::/32` } });
  assert.match(printed, new RegExp(`ip daddr \\{ ${TEST_NET_ALLOW.replaceAll('.', '\\.')} \\} ct state new counter accept`));
  assert.match(printed, /ip6 daddr \{ fd12:3456::\/32 \} ct state new counter accept/);
});

test('a bad AAS_NET_ALLOW stops aasd with a message naming it', async () => {
  for (const bad of ['10.99.0.0/33', 'not-a-range', '10.99.0.1/16', 'fd00::/129']) {
    const r = await run(path.join(BUILD, 'aasd'), ['--netguard-rules'],
      { env: { PATH: process.env.PATH, AAS_NET_ALLOW: bad } }).then(() => null, (e) => e);
    assert.ok(r, `${bad} accepted`);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /AAS_NET_ALLOW: invalid value/);
  }
});

test('a sandbox with internet reaches the allowed range', async () => {
  const r = await probe(`http://${NETS.inet.net}.2:${PORT}/`);
  assert.equal(r.rc, 0, r.out);
  assert.match(r.out, /internet-ok/);
});

test("the operator's network is refused at once", async () => {
  const r = await probe(`http://${NETS.op.net}.2:${PORT}/`);
  assert.doesNotMatch(r.out, /operator-secret/);
  assert.equal(r.rc, 7, r.out);          // could not connect: a reset, not a timeout (28)
  assert.ok(r.ms < 5000, `took ${r.ms} ms: ${r.out}`);
});

test('an address in 10.0.0.0/8 outside the test range is refused at once, not timed out', async () => {
  const r = await probe('http://10.1.2.3:80/');
  assert.equal(r.rc, 7, r.out);
  assert.ok(r.ms < 5000, `took ${r.ms} ms: ${r.out}`);
});
