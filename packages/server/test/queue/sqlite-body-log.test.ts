import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { BodyLogWriter, bodyLogFile, readLoggedBody } from '../../src/queue/sqlite-body-log.js';
import { tempDataDir } from '../helpers/server-process.js';

const bytes = (fill: number, length: number) => Buffer.alloc(length, fill);

test('bodies are written back to back and read back from their locations', () => {
  const dir = join(tempDataDir('ecapi-bodylog-'), 'log');
  const log = new BodyLogWriter(dir);
  try {
    const first = log.append({ fileNo: 1, endOffset: 0 }, [bytes(1, 10), bytes(2, 20)]);
    assert.deepEqual(first.locations, [
      { fileNo: 1, offset: 0, length: 10 },
      { fileNo: 1, offset: 10, length: 20 },
    ]);
    assert.deepEqual(first.head, { fileNo: 1, endOffset: 30 });
    const second = log.append(first.head, [bytes(3, 5)]);
    assert.deepEqual(second.locations, [{ fileNo: 1, offset: 30, length: 5 }]);
    assert.deepEqual(readLoggedBody(dir, second.locations[0]!), bytes(3, 5));
    assert.deepEqual(readLoggedBody(dir, first.locations[1]!), bytes(2, 20));
    assert.equal(readFileSync(bodyLogFile(dir, 1)).length, 35);
  } finally {
    log.close();
  }
});

test('a group written again from the same head (its transaction rolled back) overwrites the unreferenced bytes', () => {
  const dir = join(tempDataDir('ecapi-bodylog-'), 'log');
  const log = new BodyLogWriter(dir);
  try {
    const kept = log.append({ fileNo: 1, endOffset: 0 }, [bytes(7, 8)]);
    log.append(kept.head, [bytes(9, 16)]); // never committed: the head stays at kept.head
    const retried = log.append(kept.head, [bytes(4, 16)]);
    assert.deepEqual(retried.locations, [{ fileNo: 1, offset: 8, length: 16 }]);
    assert.deepEqual(readLoggedBody(dir, retried.locations[0]!), bytes(4, 16));
    assert.deepEqual(readLoggedBody(dir, kept.locations[0]!), bytes(7, 8));
  } finally {
    log.close();
  }
});

test('a body that would grow a file past its size starts the next file; a body larger than a file gets one alone', () => {
  const dir = join(tempDataDir('ecapi-bodylog-'), 'log');
  const log = new BodyLogWriter(dir, { fileBytes: 100 });
  try {
    const written = log.append({ fileNo: 1, endOffset: 60 }, [bytes(1, 30), bytes(2, 30), bytes(3, 150), bytes(4, 1)]);
    assert.deepEqual(written.locations, [
      { fileNo: 1, offset: 60, length: 30 },
      { fileNo: 2, offset: 0, length: 30 },
      { fileNo: 3, offset: 0, length: 150 },
      { fileNo: 4, offset: 0, length: 1 },
    ]);
    assert.deepEqual(written.head, { fileNo: 4, endOffset: 1 });
    written.locations.forEach((at, i) => assert.deepEqual(readLoggedBody(dir, at), bytes(i + 1, at.length)));
    assert.deepEqual(readdirSync(dir).sort(), ['00000001.log', '00000002.log', '00000003.log', '00000004.log']);
  } finally {
    log.close();
  }
});

test('reading a location past the end of its file is an error, not a short body', () => {
  const dir = join(tempDataDir('ecapi-bodylog-'), 'log');
  const log = new BodyLogWriter(dir);
  try {
    log.append({ fileNo: 1, endOffset: 0 }, [bytes(1, 10)]);
    assert.throws(() => readLoggedBody(dir, { fileNo: 1, offset: 5, length: 10 }), /shorter than a committed row says/);
  } finally {
    log.close();
  }
});
