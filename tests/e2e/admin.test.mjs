// aasctl and start-up configuration checks.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { aasctl, aasctlFail, newAccount, BUILD, DB_URL, STATE, psql } from './lib/harness.mjs';

const run = promisify(execFile);

test('account create prints the account id and a new key; only its hash is stored', async () => {
  const acct = await newAccount();
  assert.match(acct.account_id, /^[0-9a-f-]{36}$/);
  assert.match(acct.api_key, /^aas_sk_[A-Za-z0-9_-]{43}$/);
  const hash = createHash('sha256').update(acct.api_key).digest('hex');
  const dump = await run('psql', [DB_URL, '-tAX', '-c', 'select * from api_keys']);
  assert.ok(dump.stdout.includes(hash), 'the hash is stored');
  assert.ok(!dump.stdout.includes(acct.api_key), 'the key text is not');
  assert.ok(!dump.stdout.includes(acct.api_key.slice(7)), 'nor its random part');
});

test('key create, list and revoke', async () => {
  const acct = await newAccount();
  const k = await aasctl('key', 'create', '--account', acct.account_id, '--name', 'ci');
  assert.notEqual(k.api_key, acct.api_key);
  let list = await aasctl('key', 'list', '--account', acct.account_id);
  assert.equal(list.length, 2);
  assert.ok(!JSON.stringify(list).includes(k.api_key), 'list never shows keys');
  assert.deepEqual(list.map((x) => x.name).sort(), ['ci', 'default']);
  await aasctl('key', 'revoke', '--key', k.key_id);
  list = await aasctl('key', 'list', '--account', acct.account_id);
  assert.ok(list.find((x) => x.id === k.key_id).revoked_at);
  const again = await aasctlFail('key', 'revoke', '--key', k.key_id);
  assert.match(again.stderr, /not_found/);
});

test('bad input to aasctl is refused and changes nothing', async () => {
  const before = await psql('select count(*) from accounts');
  const bad = await aasctlFail('account', 'create', '--email', 'not-an-email');
  assert.match(bad.stderr, /invalid_argument/);
  const acct = await newAccount();
  const dup = await aasctlFail('account', 'create', '--email', acct.email);
  assert.match(dup.stderr, /conflict/);
  const nokey = await aasctlFail('key', 'create', '--account', 'zzz');
  assert.match(nokey.stderr, /invalid_argument/);
  const none = await aasctlFail('key', 'create', '--account', '00000000-0000-0000-0000-000000000000');
  assert.match(none.stderr, /not_found/);
  assert.equal(Number(await psql('select count(*) from accounts')), Number(before) + 1);
});

test('aasd refuses a bad configuration value and names the variable', async () => {
  for (const [name, value] of [['AAS_LISTEN', 'nowhere'], ['AAS_HTTP_THREADS', '0'],
    ['AAS_LOG_LEVEL', 'loud'], ['AAS_PUBLIC_URL', 'ftp://x']]) {
    const err = await run(path.join(BUILD, 'aasd'), [], {
      env: { PATH: process.env.PATH, AAS_STATE_DIR: STATE, AAS_DATABASE_URL: DB_URL, [name]: value },
    }).then(() => null, (e) => e);
    assert.ok(err, `${name}=${value} must be refused`);
    assert.equal(err.code, 1);
    assert.match(err.stderr, new RegExp(name));
  }
});

test('migrations are recorded once and re-running them is a no-op', async () => {
  const before = await psql('select count(*) from schema_migrations');
  await aasctl('migrate');
  await aasctl('migrate');
  assert.equal(await psql('select count(*) from schema_migrations'), before);
  assert.ok(Number(before) >= 2);
});
