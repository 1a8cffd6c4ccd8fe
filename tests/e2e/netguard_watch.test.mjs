// The isolation rule's watcher (`aasd --netguard-watch`, what
// deploy/aas-netguard.service runs as root) and the aasd that trusts its
// status instead of reading nftables, as aasd under deploy/aasd.service
// must (it has no CAP_NET_ADMIN). No VM boots: a sandbox with internet is
// refused or allowed before one would. production.test.mjs runs the same
// pair with the unit's privileges.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdirSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import path from 'node:path';
import {
  startAasd, newAccount, toolCaller, waitFor, baseEnv, vmEnv, BUILD, STATE,
} from './lib/harness.mjs';

const run = promisify(execFile);
const DIR = path.join(STATE, 'netguard-watch');
const STATUS = path.join(DIR, 'status');
const env = { ...vmEnv('ngwatch'), AAS_NETGUARD_STATUS: STATUS, AAS_NETGUARD_WATCH_S: '1' };
let watcher = null;

async function internet(srv) {
  const h = await (await fetch(`${srv.url}/healthz`)).json();
  return h.features.internet;
}

function startWatcher() {
  const p = spawn(path.join(BUILD, 'aasd'), ['--netguard-watch'], {
    env: baseEnv(env), stdio: ['ignore', 'ignore', 'pipe'],
  });
  p.log = '';
  p.stderr.on('data', (d) => { p.log += d; });
  p.done = new Promise((r) => p.on('exit', r));
  return p;
}

async function stopWatcher() {
  if (watcher && watcher.exitCode === null) { watcher.kill('SIGTERM'); await watcher.done; }
  watcher = null;
}

async function checkDeployment() {
  try {
    const { stdout } = await run(path.join(BUILD, 'aasd'), ['--check-deployment'], { env: baseEnv(env) });
    return { code: 0, stdout };
  } catch (e) {
    return { code: e.code, stdout: e.stdout };
  }
}

after(async () => {
  await stopWatcher();
  rmSync(DIR, { recursive: true, force: true });
});

test('aasd trusts the watcher: a stale or foreign status means no network, with the reason', { timeout: 180000 }, async () => {
  rmSync(DIR, { recursive: true, force: true });
  mkdirSync(DIR, { recursive: true });
  // A status for another ruleset (another allow-list), fresh.
  const now = Math.floor(Date.now() / 1000);
  writeFileSync(STATUS, `aas-netguard 1\nstate ok\nmark aas rules 0000000000000001\nchecked ${now}\nevery 1\n`);
  const srv = await startAasd(env);
  try {
    const acct = await newAccount();
    const call = await toolCaller(srv, acct);
    let f = await internet(srv);
    assert.equal(f.status, 'missing');
    assert.match(f.why, /another ruleset/);
    const refused = await call('create_sandbox', { size: 'small', internet: true });
    assert.ok(refused.isError);
    assert.match(refused.text, /sandbox networking is unavailable.*another ruleset/);
    let c = await checkDeployment();
    assert.equal(c.code, 1, c.stdout);
    assert.match(c.stdout, /^missing\s+internet\s+.*another ruleset/m);

    // The watcher installs the rule and records it: aasd gives networks.
    watcher = startWatcher();
    await waitFor('the watcher\'s status', async () => (await internet(srv)).status === 'ok', 30000)
      .catch((e) => { throw new Error(`${e.message}\n${watcher.log}\n${readFileSync(STATUS, 'utf8')}`); });
    c = await checkDeployment();
    assert.match(c.stdout, /^ok\s+internet\s+/m);

    // A flush of the table: the watcher puts it back by itself.
    await run('nft', ['delete', 'table', 'inet', 'aas_guard']);
    await waitFor('the rule back', async () => {
      try { await run('nft', ['list', 'table', 'inet', 'aas_guard']); return true; } catch { return false; }
    }, 10000);

    // No watcher: its status goes stale, and aasd says so.
    await stopWatcher();
    await waitFor('a stale status to show', async () => (await internet(srv)).status === 'missing', 30000);
    f = await internet(srv);
    assert.match(f.why, /watcher last looked .* is aas-netguard\.service \(aasd --netguard-watch\) running\?/);
    const h = await (await fetch(`${srv.url}/healthz`)).json();
    assert.deepEqual(h.missing.filter((m) => m === 'internet' || m === 'previews'), ['internet', 'previews']);
  } finally {
    await srv.stop();
  }
});
