/**
 * fs/durable-files.ts on real files: content, modes from creation whatever the umask, exclusive
 * creation, no temporary file left behind. That each step is fsynced is shown by
 * test/reliability/power-loss-fsync.test.ts (strace).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEmptyFileDurably, ensureDirDurably, writeFileDurably } from '../../src/fs/durable-files.js';

const mode = (p: string) => statSync(p).mode & 0o777;

test('ensureDirDurably creates every missing component with mode 0700, even under umask 000', () => {
  const base = mkdtempSync(join(tmpdir(), 'ecapi-durable-'));
  const old = process.umask(0);
  try {
    ensureDirDurably(join(base, 'a', 'b', 'c'));
  } finally {
    process.umask(old);
  }
  for (const p of ['a', 'a/b', 'a/b/c']) assert.equal(mode(join(base, p)), 0o700, p);
  ensureDirDurably(join(base, 'a', 'b', 'c')); // existing: no error
});

test('writeFileDurably replaces a file atomically with mode 0600 and leaves no temporary file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ecapi-durable-'));
  const file = join(dir, 'f.pem');
  const old = process.umask(0);
  try {
    writeFileDurably(file, 'one');
    assert.equal(readFileSync(file, 'utf8'), 'one');
    assert.equal(mode(file), 0o600);
    writeFileDurably(file, Buffer.from('two'));
    assert.equal(readFileSync(file, 'utf8'), 'two');
    assert.equal(mode(file), 0o600);
  } finally {
    process.umask(old);
  }
  assert.deepEqual(readdirSync(dir), ['f.pem']);
});

test('writeFileDurably with exclusive never replaces an existing file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ecapi-durable-'));
  const file = join(dir, 'master.key');
  writeFileDurably(file, 'first', { exclusive: true });
  assert.throws(() => writeFileDurably(file, 'second', { exclusive: true }), { code: 'EEXIST' });
  assert.equal(readFileSync(file, 'utf8'), 'first');
  assert.deepEqual(readdirSync(dir), ['master.key'], 'the temporary file is removed after a refused link');
});

test('createEmptyFileDurably creates once, 0600, and never truncates', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ecapi-durable-'));
  const file = join(dir, 'x.db');
  assert.equal(createEmptyFileDurably(file), true);
  assert.equal(mode(file), 0o600);
  writeFileSync(file, 'data');
  assert.equal(createEmptyFileDurably(file), false);
  assert.equal(readFileSync(file, 'utf8'), 'data');
});
