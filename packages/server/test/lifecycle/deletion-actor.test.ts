/**
 * `--actor` of `identities forget` / `events delete` is bounded and printable-only, and `deletions`
 * prints any stored actor as one inert line (issue 29, point 7b): a newline or terminal escape codes
 * in an actor used to be stored and printed raw (a forged audit line), and a 100 KB actor accepted.
 * Real files: the CLI against a data dir; the "stored before" row is written into lifecycle.db.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { cli, cliJson, provision, tempDataDir, TEST_PROFILE } from '../helpers/server-process.js';
import { sha } from '../helpers/event-generator.js';

const H = sha('actor-test@example.com');

test('--actor: control characters, escape codes, invisible formatting and more than 200 characters are refused; nothing is recorded', async () => {
  const dataDir = tempDataDir();
  await provision(dataDir, ['shop']);
  const refused: [string, RegExp][] = [
    ['dpo\n17\t2026-01-01T00:00:00.000Z\tcli:root\tforget_identifier\tshop\tdone\t{}', /printable characters only/],
    ['\u001b[2J\u001b[31mroot', /printable characters only/],
    ['bob\u202Eevil', /printable characters only/],
    ['bob\u0000', /printable characters only/],
    ['x'.repeat(100_000), /at most 200 characters \(got 100000\)/],
    ['   ', /it is empty/],
  ];
  for (const [actor, message] of refused) {
    for (const args of [['identities', 'forget', 'shop', '--identifier', `email:${H}`], ['events', 'delete', 'shop', 'e-1']]) {
      const r = await cli(dataDir, [...args, '--actor', actor, '--no-wait']);
      assert.equal(r.code, 1, JSON.stringify(actor.slice(0, 40)));
      assert.match(r.stderr, message);
      assert.equal(r.stderr.split('\n').length, 2, 'one line');
    }
  }
  assert.deepEqual(await cliJson(dataDir, ['deletions']), [], 'nothing recorded');
  const fine = 'Jane Doe <dpo@example.com>, ticket #42 (Zoë)';
  const ok = await cli(dataDir, ['--json', 'events', 'delete', 'shop', 'e-1', '--actor', fine, '--no-wait']);
  assert.equal(ok.code, 3, ok.stderr);
  assert.equal(JSON.parse(ok.stdout).actor, fine);
  const longest = await cli(dataDir, ['events', 'delete', 'shop', 'e-2', '--actor', 'é'.repeat(200), '--no-wait']);
  assert.equal(longest.code, 3, '200 characters (not bytes) are accepted');
});

test('deletions prints an actor stored before the check as one escaped, bounded line', { skip: TEST_PROFILE !== 'sqlite' && 'writes lifecycle.db directly (embedded profile)' }, async () => {
  const dataDir = tempDataDir();
  await provision(dataDir, ['shop']);
  assert.equal((await cli(dataDir, ['events', 'delete', 'shop', 'e-1', '--actor', 'alice', '--no-wait'])).code, 3);
  const forged = 'mallory\n99\t2026-01-01T00:00:00.000Z\tcli:root\tforget_identifier\tshop\tdone\t{}\u001b]0;owned\u0007\u001b[2K' + 'A'.repeat(100_000);
  const db = new Database(join(dataDir, 'production', 'lifecycle.db'));
  db.prepare(
    `INSERT INTO deletion_requests (data_set_id, kind, target, target_digest, suppress, bound_seq, actor, requested_at, state)
     VALUES ('shop', 'delete_event', NULL, 'x', 0, 0, ?, 0, 'done')`,
  ).run(forged);
  db.close();
  const r = await cli(dataDir, ['deletions', 'shop']);
  assert.equal(r.code, 0, r.stderr);
  const lines = r.stdout.split('\n').filter((l) => l !== '');
  assert.equal(lines.length, 2, 'one line per request: no forged line');
  assert.ok(!/[\u0000-\u0008\u000b-\u001f\u007f]/.test(r.stdout), 'no control character reaches the terminal');
  assert.match(lines[0]!, /\tmallory\\u\{a\}99\\u\{9\}2026/);
  assert.match(lines[0]!, /\\u\{1b\}\]0;owned\\u\{7\}/);
  assert.match(lines[0]!, /…\(99\d{3} more characters\)/);
  assert.ok(lines[0]!.length < 1000, 'bounded');
  // --json escapes by itself and keeps the stored value whole.
  assert.equal((await cliJson(dataDir, ['deletions', 'shop']))[0].actor, forged);
});
