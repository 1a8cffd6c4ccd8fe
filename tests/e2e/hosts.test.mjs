// Hosts in PostgreSQL: aasd registers its host with the capacity libvirt
// reports; placement reserves a size's memory and vCPUs on it in the
// create's transaction; a full or draining host refuses at once with
// no_capacity (REST 503 with Retry-After) and charges nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  aasctl, aasctlFail, newAccount, psql, sleep, startAasd, toolCaller, vmEnv,
} from './lib/harness.mjs';

const SMALL_MIB = 512;

async function hostRow(uri) {
  const h = (await aasctl('host', 'list')).find((x) => x.uri === uri);
  assert.ok(h, `host ${uri} is listed`);
  return h;
}

async function balance(acct) {
  return Number(await psql(`select balance from accounts where id = '${acct.account_id}'`));
}

// get_service_info's capacity, refreshed by aasd every 2 s, until `ok`.
async function roomUntil(call, ok) {
  let room;
  for (let i = 0; i < 50; i++) {
    room = (await call('get_service_info', {})).json.capacity.room;
    if (ok(room)) return room;
    await sleep(200);
  }
  assert.fail(`capacity never matched: ${JSON.stringify(room)}`);
}

test('aasctl host: bad input is refused and names what is wrong', async () => {
  const uri = `test:///bad-input-${process.pid}`;
  assert.match((await aasctlFail('host', 'add', uri, '--memory-overcommit', 'lots')).stderr,
    /invalid_argument/);
  assert.match((await aasctlFail('host', 'add', uri, '--memory-overcommit', '-1')).stderr,
    /invalid_argument/);
  assert.match((await aasctlFail('host', 'add', uri, '--cpu-overcommit', '99')).stderr,
    /cpu_overcommit/);
  assert.match((await aasctlFail('host', 'add', 'a,b')).stderr, /without commas/);
  assert.match((await aasctlFail('host', 'add', uri, '--name', 'bad name!')).stderr, /name: 1 to 255 printable/);
  assert.match((await aasctlFail('host', 'drain', 'no-such-host')).stderr, /not_found/);
  assert.match((await aasctlFail('host', 'remove', 'no-such-host')).stderr, /not_found/);
  assert.match((await aasctlFail('host', 'evacuate', 'no-such-host')).stderr, /not_found/);
  assert.match((await aasctlFail('host', 'add', uri, '--storage', 'nfs')).stderr, /storage: shared .* or pool/);
  for (const bad of ['abc', 'A'.repeat(64), `${'0'.repeat(63)}g`, '0'.repeat(65)]) {
    assert.match((await aasctlFail('host', 'add', uri, '--isolation-rule', bad)).stderr,
      /isolation_rule: the SHA-256/, bad);
  }
  for (const bad of ['host.example', '10.0.0.300', '::1', '10.0.0.1:80', '']) {
    assert.match((await aasctlFail('host', 'add', uri, '--preview-address', bad)).stderr,
      /preview_address: an IPv4 address/, bad);
  }
  assert.equal(await psql(`select count(*) from hosts where uri in ('a,b', '${uri}')`), '0');
  // Any printable name but quotes, backslashes and spaces; a URI is its default name.
  const odd = `test:///with_under+score@x?a=b&c=[d]-${process.pid}`;
  assert.equal((await aasctl('host', 'add', odd)).name, odd);
  assert.match((await aasctlFail('host', 'evacuate', odd, '--wait', '-1')).stderr, /--wait: seconds/);
  assert.match((await aasctlFail('host', 'evacuate', odd, '--wait', 'soon')).stderr, /--wait: seconds/);
  assert.equal(JSON.parse(await psql(`select json_build_object('d', draining, 'e', evacuating)::text from hosts where uri = '${odd}'`)).e, false,
    'a refused evacuate changes nothing');
  // Nothing lives there: the evacuation is over at once.
  const ev = await aasctl('host', 'evacuate', odd, '--wait', '5');
  assert.deepEqual([ev.evacuating, ev.waiting, ev.moving, ev.moved, ev.not_moved], [true, 0, 0, 0, []]);
  assert.equal((await aasctl('host', 'undrain', odd)).draining, false);
  assert.equal((await aasctl('host', 'list')).find((h) => h.uri === odd).evacuating, false);
  assert.equal((await aasctl('host', 'remove', odd)).removed, true);
});

test('a full host refuses creates at once with no_capacity and charges nothing', async () => {
  const env = vmEnv('hosts');
  const uri = env.AAS_LIBVIRT_URI;
  const srv = await startAasd(env);
  let a;
  let call;
  try {
    let h = await hostRow(uri);
    assert.equal(h.state, 'up');
    assert.equal(h.shared, false, 'a host from AAS_LIBVIRT_URI is its aasd\'s alone');
    assert.ok(h.capacity.memory_mib > 1024 && h.capacity.vcpus >= 1, JSON.stringify(h));
    assert.ok(h.live.free_memory_mib > 0 && h.live.free_memory_mib <= h.capacity.memory_mib);
    // Room for one small sandbox: 1.5 of its memory.
    const ratio = ((SMALL_MIB * 1.5) / h.capacity.memory_mib).toFixed(3);
    h = (await aasctl('host', 'add', uri, '--memory-overcommit', ratio));
    assert.equal(h.memory_overcommit, Number(ratio));
    const acct = await newAccount();
    call = await toolCaller(srv, acct);
    await roomUntil(call, (r) => r.sandboxes_that_fit_now.small === 1);
    const first = await call('create_sandbox', { size: 'small', timeout_minutes: 2 });
    assert.equal(first.isError, false, first.text);
    a = first.json.sandbox_id;
    h = await hostRow(uri);
    assert.deepEqual(h.reserved, { memory_mib: SMALL_MIB, vcpus: 1 });
    assert.equal(h.sandboxes, 1);
    const metrics = await (await fetch(`${srv.url}/metrics`)).text();
    assert.ok(metrics.includes(`aas_host_memory_mib{host="${uri}",kind="reserved"} ${SMALL_MIB}\n`),
      metrics.split('\n').filter((l) => l.startsWith('aas_host')).join('\n'));
    assert.match(metrics, new RegExp(`aas_host_up\\{host="${uri.replace(/[?.]/g, '\\$&')}"\\} 1\n`));

    const before = await balance(acct);
    const second = await call('create_sandbox', { size: 'small', timeout_minutes: 2 });
    assert.equal(second.isError, true);
    assert.match(second.text, /no capacity for size small right now.*try again in 30 s or a smaller size/);
    const rest = await fetch(`${srv.url}/v1/sandboxes`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': acct.api_key },
      body: JSON.stringify({ size: 'small', timeout_minutes: 2 }),
    });
    assert.equal(rest.status, 503);
    assert.equal(rest.headers.get('retry-after'), '30');
    assert.equal((await rest.json()).error.code, 'no_capacity');
    assert.equal(await balance(acct), before, 'a refused create charges nothing');
    assert.equal(await psql(`select count(*) from sandboxes where account_id = '${acct.account_id}'`), '1');

    // Tenants see the fleet in aggregate, never a host.
    const info = await roomUntil(call, (r) => r.sandboxes_that_fit_now.small === 0);
    assert.equal(info.reserved_memory_mib >= SMALL_MIB, true);
    const infoText = (await call('get_service_info', {})).text;
    assert.ok(!infoText.includes('embed'), 'no host URI in get_service_info');

    // Draining: the running sandbox stays, nothing new goes there, and a
    // host with a live sandbox cannot be removed.
    await aasctl('host', 'add', uri, '--memory-overcommit', '1');
    await aasctl('host', 'drain', uri);
    const drained = await call('create_sandbox', { size: 'small', timeout_minutes: 2 });
    assert.match(drained.text, /no capacity for size small/);
    assert.match((await aasctlFail('host', 'remove', uri)).stderr, /1 sandboxes still live there/);
    assert.equal((await call('run_command', { sandbox_id: a, command: 'echo still here' })).json.stdout,
      'still here\n');
    await aasctl('host', 'undrain', uri);
    assert.equal((await hostRow(uri)).draining, false);
  } finally {
    if (a && call) await call('destroy_sandbox', { sandbox_id: a });
    await srv.stop();
  }
  const h = await hostRow(uri);
  assert.deepEqual(h.reserved, { memory_mib: 0, vcpus: 0 }, 'a destroy gives the room back');
});
