// A fleet of hosts (make bench, BENCH_ONLY=fleet), on libvirt daemons of
// their own on this machine (tests/e2e/lib/hostd.mjs), one of them in a
// network namespace made here:
//  1. placement time per create: the admission transaction (hosts_reserve,
//     bench/place.c) with 2 and 16 hosts against 1 host, each carrying 20
//     live sandboxes' reservations;
//  2. create-to-ready of a small sandbox on the remote host (a libvirt
//     daemon reached over its socket, as over ssh) against the local
//     embedded driver, one aasd each;
//  3. evacuation of one small sandbox serving a page: aasctl host evacuate
//     from start to end, the guest's pause as libvirt reports it (the
//     migration's downtime, in the command's report), and the longest time its preview URL, polled
//     every 20 ms through the gateway, did not answer (against the pause).
// Usage: node bench/fleet.mjs BUILD_DIR STATE_DIR
//   BENCH_FLEET_ROUNDS  creates per host kind (default 3)
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { promisify } from 'node:util';
import { startVmAasd, client, tool, sleep, pct } from './lib.mjs';
import { makeNetns, startHostd } from '../tests/e2e/lib/hostd.mjs';

const run = promisify(execFile);
const [BUILD, STATE] = process.argv.slice(2);
const ROUNDS = Number(process.env.BENCH_FLEET_ROUNDS || 3);
const IMAGE = process.env.AAS_IMAGE_DIR || `${STATE}/../images/current`;
const PLACE_N = 400;

if (!BUILD || !STATE) throw new Error('usage: node bench/fleet.mjs BUILD_DIR STATE_DIR');
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new Error(`BENCH_FLEET_ROUNDS: not a positive integer: ${process.env.BENCH_FLEET_ROUNDS}`);

const env = { ...process.env, AAS_STATE_DIR: STATE };
// The settings the benchmark's aasd computes its isolation rule from.
const ruleEnv = { PATH: process.env.PATH };
const aasctl = async (...args) => JSON.parse((await run(`${BUILD}/aasctl`, args, { env })).stdout);
const median = (a) => pct(a, 0.5);

async function account() {
  return (await aasctl('account', 'create', '--email', `bench-fleet-${randomBytes(4).toString('hex')}@bench.invalid`)).api_key;
}

// 1. Placement: 1, 2 and 16 hosts, interleaved twice so drift hits all.
async function placement() {
  const url = execFileSync('sh', ['deploy/devdb.sh', 'url', STATE], { encoding: 'utf8' }).trim();
  const us = { 1: [], 2: [], 16: [] };
  for (let round = 0; round < 2; round++) {
    for (const hosts of [1, 2, 16]) {
      const { stdout } = await run(`${BUILD}/bench_place`, [url, String(hosts), '20', String(PLACE_N / 2)]);
      for (const line of stdout.trim().split('\n')) us[hosts].push(Number(line.split(' ')[1]));
    }
  }
  const p = (h) => median(us[h]) / 1000;
  console.log(`placement per create (p50 of ${PLACE_N}): 1 host ${p(1).toFixed(2)} ms, 2 hosts ${p(2).toFixed(2)} ms`
    + ` (${(p(2) / p(1)).toFixed(2)}x), 16 hosts ${p(16).toFixed(2)} ms (${(p(16) / p(1)).toFixed(2)}x)`);
}

// Create-to-ready of ROUNDS small sandboxes through an aasd on `uri`.
async function creates(tag, uri) {
  const aasd = await startVmAasd(BUILD, STATE, uri, IMAGE);
  const ms = [];
  try {
    const c = await client(aasd.url, await account());
    for (let r = 0; r < ROUNDS; r++) {
      const t0 = performance.now();
      const { sandbox_id: id } = await tool(c, 'create_sandbox', { size: 'small', timeout_minutes: 5 });
      ms.push(performance.now() - t0);
      await tool(c, 'destroy_sandbox', { sandbox_id: id });
    }
    await c.close();
  } finally {
    await aasd.stop();
  }
  console.log(`  ${tag}: create-to-ready p50 ${median(ms).toFixed(0)} ms (${ms.map((x) => x.toFixed(0)).join(', ')})`);
  return median(ms);
}

function fetchPreview(port, host) {
  return new Promise((resolve) => {
    const q = http.get({ host: '127.0.0.1', port, path: '/', headers: { Host: host }, timeout: 1000 }, (r) => {
      let body = '';
      r.on('data', (d) => { body += d; });
      r.on('end', () => resolve(r.statusCode === 200 && body.includes('bench page')));
    });
    q.on('error', () => resolve(false));
    q.on('timeout', () => { q.destroy(); resolve(false); });
  });
}

// 3. One evacuation, watched from outside.
async function evacuation(A, B, net) {
  const aasd = await startVmAasd(BUILD, STATE, `${A.uri},${B.uri}`, IMAGE);
  try {
    await aasctl('host', 'add', A.uri, '--name', 'bench-a', '--preview-address', net.host,
      '--isolation-rule', A.installRule(`${BUILD}/aasd`, ruleEnv));
    await aasctl('host', 'add', B.uri, '--name', 'bench-b', '--preview-address', net.peer,
      '--isolation-rule', B.installRule(`${BUILD}/aasd`, ruleEnv));
    await aasctl('host', 'undrain', 'bench-a'); // an earlier run may have left it evacuating
    await aasctl('host', 'drain', 'bench-b');
    const c = await client(aasd.url, await account());
    const { sandbox_id: id } = await tool(c, 'create_sandbox', { size: 'small', timeout_minutes: 10 });
    await tool(c, 'write_file', { sandbox_id: id, path: 'www/index.html', content: 'bench page\n' });
    await tool(c, 'run_command', { sandbox_id: id, background: true, timeout_seconds: 600,
      command: 'cd ~/www && exec python3 -m http.server 8000' });
    const { url } = await tool(c, 'expose_port', { sandbox_id: id, port: 8000 });
    const host = new URL(url).host;
    for (let i = 0; !(await fetchPreview(aasd.port, host)); i++) {
      if (i > 200) throw new Error('the preview never answered');
      await sleep(100);
    }
    await aasctl('host', 'undrain', 'bench-b');
    let watching = true;
    let lastOk = performance.now();
    let worst = 0;
    const watcher = (async () => {
      while (watching) {
        const t = performance.now();
        if (await fetchPreview(aasd.port, host)) {
          worst = Math.max(worst, performance.now() - lastOk);
          lastOk = performance.now();
        }
        await sleep(Math.max(0, 20 - (performance.now() - t)));
      }
    })();
    const t0 = performance.now();
    const ev = await aasctl('host', 'evacuate', 'bench-a', '--wait', '300');
    const total = performance.now() - t0;
    // Until the preview answers from the new host.
    for (let i = 0; i < 500 && performance.now() - lastOk > 100; i++) await sleep(20);
    watching = false;
    await watcher;
    if (ev.moved < 1 || ev.not_moved.length) throw new Error(`not moved: ${JSON.stringify(ev)}`);
    const pause = ev.longest_pause_ms;
    console.log(`evacuation of one small sandbox: aasctl host evacuate ${total.toFixed(0)} ms in all`
      + ' (the maintenance round that takes it up runs every 2 s)');
    console.log(`  guest paused ${Number.isFinite(pause) ? `${pause} ms` : 'unknown'} (libvirt's downtime);`
      + ` preview did not answer for at most ${worst.toFixed(0)} ms`
      + (Number.isFinite(pause) && pause > 0 ? ` (${(worst / pause).toFixed(1)}x the pause: libvirt ends the move on both hosts before aasd points the gateway at the new one)` : ''));
    await tool(c, 'destroy_sandbox', { sandbox_id: id });
    await c.close();
  } finally {
    await aasd.stop();
    for (const h of ['bench-a', 'bench-b']) await aasctl('host', 'remove', h).catch(() => {});
  }
}

function freeSubnet() {
  const used = execFileSync('ip', ['-4', '-o', 'addr', 'show'], { encoding: 'utf8' });
  for (let i = 0; i < 127; i++) {
    const n = 128 + ((process.pid + i) % 127);
    if (!used.includes(` 10.99.${n}.`)) return n;
  }
  throw new Error('no free /24 in 10.99.128.0/17');
}

await placement();
const n = freeSubnet();
const net = makeNetns('bfleet', `10.99.${n}.1`, `10.99.${n}.2`);
let A;
let B;
try {
  A = await startHostd('bench-a', { base: STATE });
  B = await startHostd('bench-b', { base: STATE, netns: net });
  // Hosts an earlier run left draining take nothing. The operator's
  // install step: the isolation rule in B's namespace (A shares this
  // machine's, where aasd installs it), recorded for both.
  for (const h of [A, B]) {
    await aasctl('host', 'add', h.uri, '--isolation-rule', h.installRule(`${BUILD}/aasd`, ruleEnv));
    await aasctl('host', 'undrain', h.uri);
  }
  console.log(`create-to-ready, ${ROUNDS} small sandboxes each:`);
  const local = await creates('local (qemu:///embed)', `qemu:///embed?root=${STATE}/libvirt-bench-fleet`);
  const remote = await creates('remote (a libvirt daemon over its socket, in its own network namespace)', B.uri);
  console.log(`  remote / local: ${(remote / local).toFixed(2)}x`);
  await evacuation(A, B, net);
} finally {
  await A?.stop();
  await B?.stop();
  net.remove();
}
