// The production files in deploy/ and docs/operations.md stay honest: every
// variable they name exists, the settings example parses, the unit and the
// nginx site agree with the code (deploy/verify.sh checks their syntax).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { ROOT, BUILD } from './lib/harness.mjs';

const run = promisify(execFile);
const read = (f) => readFileSync(path.join(ROOT, f), 'utf8');

const FILES = [
  'deploy/aasd.service', 'deploy/aas-netguard.service', 'deploy/aasd.env.example', 'deploy/aas-tmpfiles.conf',
  'deploy/nginx/aas.conf', 'deploy/nginx/aas-proxy.conf', 'docs/operations.md',
];

async function knownVariables() {
  const { stdout } = await run(path.join(BUILD, 'aasd'), ['--config-table']);
  return new Set([...stdout.matchAll(/^\| `(AAS_[A-Z0-9_]+)`/gm)].map((m) => m[1]));
}

function envExample() {
  const env = {};
  for (const line of read('deploy/aasd.env.example').split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^(AAS_[A-Z0-9_]+)="([^"]*)"$/.exec(line);
    assert.ok(m, `not VAR="value": ${line}`);
    env[m[1]] = m[2];
  }
  return env;
}

test('every AAS_ variable the deploy files and the guide name exists in config_table.c', async () => {
  const known = await knownVariables();
  assert.ok(known.size > 30);
  for (const f of FILES) {
    for (const [name] of read(f).matchAll(/AAS_[A-Z0-9_]+/g)) {
      assert.ok(known.has(name), `${f} names ${name}, which aasd does not read`);
    }
  }
});

test('the settings example is accepted by aasd\'s configuration', async () => {
  const env = envExample();
  assert.equal(env.AAS_LIBVIRT_URI, 'qemu:///system');
  assert.equal(env.AAS_VIRT, 'kvm');
  const state = mkdtempSync(path.join(tmpdir(), 'aas-deploy-'));
  try {
    // A database that cannot exist (a unix socket directory that does not):
    // aasd gets past its configuration and stops at the database, without
    // any network traffic and before it listens.
    const r = await run(path.join(BUILD, 'aasd'), [], {
      env: { PATH: process.env.PATH, ...env, AAS_STATE_DIR: state,
        AAS_DATABASE_URL: `postgresql:///aas?host=${state}/nowhere&connect_timeout=2` },
      timeout: 20000,
    }).then(() => ({ code: 0, stderr: '' }), (e) => e);
    assert.notEqual(r.code, 0);
    assert.doesNotMatch(r.stderr, /config:/, r.stderr);
    assert.match(r.stderr, /start:/, r.stderr);
  } finally {
    rmSync(state, { recursive: true, force: true });
  }
});

test('the unit, tmpfiles and nginx agree with the code and the settings', () => {
  const unit = read('deploy/aasd.service');
  const socketDir = /#define ORCH_SOCKET_DIR "([^"]+)"/.exec(read('vmm/orch_int.h'))[1];
  // The socket directory first; after it only optional ('-') system paths.
  assert.match(unit, new RegExp(`^ReadWritePaths=${socketDir}( -/\\S+)*$`, 'm'));
  assert.match(read('deploy/aas-tmpfiles.conf'), new RegExp(`^d ${socketDir} 0700 aas aas -$`, 'm'));
  assert.match(unit, /^User=aas$/m);
  const env = envExample();
  assert.match(unit, new RegExp(`^StateDirectory=${path.basename(env.AAS_STATE_DIR)}$`, 'm'));
  assert.match(unit, /^EnvironmentFile=\/etc\/aas\/aasd\.env$/m);
  const site = read('deploy/nginx/aas.conf');
  const body = /client_max_body_size (\d+)m;/.exec(site);
  assert.equal(Number(body[1]) * 1024 * 1024, Number(env.AAS_MAX_BODY_BYTES));
  assert.equal(site.match(/client_max_body_size/g).length, 2);
  assert.match(site, new RegExp(`server ${env.AAS_LISTEN.replace(/\./g, '\\.')};`));
  // Calls naming a sandbox (Mcp-Param-Sandbox-Id) stay on one aasd.
  assert.match(site, /hash \$http_mcp_param_sandbox_id consistent;/);
  const proxy = read('deploy/nginx/aas-proxy.conf');
  assert.match(proxy, /^proxy_pass http:\/\/\$aas_upstream;$/m);
  for (const d of ['proxy_buffering off;', 'proxy_http_version 1.1;', 'proxy_read_timeout 3600s;',
    'proxy_set_header Upgrade $http_upgrade;', 'proxy_set_header X-Forwarded-For',
    'proxy_set_header X-Forwarded-Proto $scheme;']) {
    assert.ok(proxy.includes(d), d);
  }
});

test('deploy/verify.sh passes (nginx -t and systemd-analyze when installed)', async () => {
  const { stdout } = await run('sh', [path.join(ROOT, 'deploy/verify.sh')], {
    env: { ...process.env, AASD: path.join(BUILD, 'aasd') },
  });
  assert.match(stdout, /nginx/);
  assert.match(stdout, /systemd/);
  assert.match(stdout, /makes the unit's ReadWritePaths/);
});
