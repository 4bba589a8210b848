/**
 * fs/page-gap-scrub.ts and fs/old-copies.ts on real SQLite files: after deleting rows and clearing
 * the old copies, no byte of the deleted rows is left anywhere in the file or its WAL, including the
 * unallocated space of pages SQLite rebuilt; no row that was not deleted changes; the file passes
 * integrity_check; and another connection that had the old pages cached does not write the old
 * bytes back. Writers of other threads go on during the scrub.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { createRequire } from 'node:module';
import { spawnSync } from 'node:child_process';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { scrubPageGaps, unallocatedSpace, ScrubRefusedError } from '../../src/fs/page-gap-scrub.js';
import { clearOldCopies } from '../../src/fs/old-copies.js';

const MARK = 'ERASEDMARK';

function freshFile(): string {
  return join(mkdtempSync(join(tmpdir(), 'ecapi-scrub-')), 'view.db');
}

function open(file: string): Database.Database {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('secure_delete = ON');
  return db;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS records (key TEXT PRIMARY KEY, body TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS links (id INTEGER PRIMARY KEY, identifier TEXT NOT NULL, record TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS links_by_identifier ON links (identifier, record);
`;

/** Occurrences of the marker in the file and its WAL. */
function marksLeft(file: string): number {
  let n = 0;
  for (const f of [file, `${file}-wal`]) {
    if (!existsSync(f)) continue;
    const bytes = readFileSync(f);
    for (let i = bytes.indexOf(MARK); i >= 0; i = bytes.indexOf(MARK, i + 1)) n++;
  }
  return n;
}

/** Inserts `count` rows, the marked ones (every `markEvery`th; none for 0) carrying MARK in key and body. */
function insertRows(db: Database.Database, prefix: string, count: number, markEvery: number, seed: number): string[] {
  const marked: string[] = [];
  const record = db.prepare('INSERT OR REPLACE INTO records (key, body) VALUES (?, ?)');
  const link = db.prepare('INSERT INTO links (identifier, record) VALUES (?, ?)');
  db.transaction(() => {
    for (let i = 0; i < count; i++) {
      const mark = markEvery > 0 && i % markEvery === 0;
      const key = `${((i * 2654435761 + seed) >>> 0).toString(36)}-${prefix}${i}${mark ? MARK : ''}`;
      if (mark) marked.push(key);
      record.run(key, `${mark ? MARK : ''}${'b'.repeat(40 + ((i * 7) % 90))}`);
      link.run(`${mark ? MARK : 'id'}-${(i * 40503 + seed) % 100_003}`, key);
    }
  })();
  return marked;
}

function deleteRows(db: Database.Database, keys: readonly string[]): void {
  const record = db.prepare('DELETE FROM records WHERE key = ?');
  const link = db.prepare('DELETE FROM links WHERE record = ?');
  db.transaction(() => {
    for (const k of keys) {
      record.run(k);
      link.run(k);
    }
  })();
}

function contents(db: Database.Database): string {
  const records = db.prepare('SELECT key, body FROM records ORDER BY key').all();
  const links = db.prepare('SELECT identifier, record FROM links ORDER BY id').all();
  return JSON.stringify([records, links]);
}

/**
 * A file where deleted rows left old copies in rebuilt pages (secure_delete alone does not zero
 * them): rows inserted, more rows inserted so that pages split and cells move, the first rows
 * deleted. Whether a copy is left depends on where the splits fall, so seeds are tried in turn.
 */
function fileWithOldCopies(): { file: string; db: Database.Database } {
  for (let seed = 1; seed <= 20; seed++) {
    const file = freshFile();
    const db = open(file);
    db.exec(SCHEMA);
    const marked = insertRows(db, 'a', 6000, 1 + (seed % 3), seed);
    insertRows(db, 'z', 6000, 0, seed + 1);
    deleteRows(db, marked);
    db.pragma('wal_checkpoint(TRUNCATE)');
    if (marksLeft(file) > 0) return { file, db };
    db.close();
    rmSync(join(file, '..'), { recursive: true, force: true });
  }
  throw new Error('no seed left an old copy: the case the scrub exists for did not arise');
}

test('unallocatedSpace: the space between the cell pointers and the cell content of each b-tree page type; null for anything else', () => {
  const page = new Uint8Array(4096);
  const header = (type: number, cells: number, content: number) => {
    page.fill(0);
    page[0] = type;
    page[3] = cells >> 8;
    page[4] = cells & 0xff;
    page[5] = content >> 8;
    page[6] = content & 0xff;
  };
  header(13, 3, 3000); // table leaf: 8-byte header
  assert.deepEqual(unallocatedSpace(page, 0, 4096), [8 + 6, 3000]);
  header(10, 3, 3000); // index leaf
  assert.deepEqual(unallocatedSpace(page, 0, 4096), [8 + 6, 3000]);
  header(5, 3, 3000); // table interior: 12-byte header
  assert.deepEqual(unallocatedSpace(page, 0, 4096), [12 + 6, 3000]);
  header(2, 0, 0); // index interior, empty; content start 0 means 65536
  assert.equal(unallocatedSpace(page, 0, 4096), null, 'content past the usable size: not a page to touch');
  assert.deepEqual(unallocatedSpace(new Uint8Array(65536).fill(0).map((_, i) => (i === 0 ? 2 : 0)), 0, 65536), [12, 65536]);
  header(13, 2000, 3000); // pointers past the content: inconsistent
  assert.equal(unallocatedSpace(page, 0, 4096), null);
  header(13, 3, 4000);
  assert.equal(unallocatedSpace(page, 0, 3990), null, 'content start past the usable size (reserved bytes)');
  for (const type of [0, 1, 3, 4, 6, 9, 11, 12, 14, 255]) {
    header(type, 3, 3000);
    assert.equal(unallocatedSpace(page, 0, 4096), null, `type byte ${type}`);
  }
  header(13, 1, 3000);
  const first = new Uint8Array(4096);
  first.set(page.subarray(0, 8), 100); // page 1: the b-tree header follows the 100-byte file header
  assert.deepEqual(unallocatedSpace(first, 100, 4096), [108 + 2, 3000]);
});

test('rows deleted after page splits: old copies are left in rebuilt pages until the scrub, which zeroes them and changes no row', async () => {
  const { file, db } = fileWithOldCopies();
  try {
    const before = contents(db);
    const left = marksLeft(file);

    const result = await scrubPageGaps(file);
    assert.equal(result.complete, true);
    assert.ok(result.scrubbed > 0 && result.bytes > 0, JSON.stringify(result));
    db.pragma('wal_checkpoint(TRUNCATE)');
    assert.equal(marksLeft(file), 0, `left ${left} before the scrub`);
    assert.equal(db.pragma('integrity_check', { simple: true }), 'ok');
    assert.equal(contents(db), before, 'no row changed');

    const again = await scrubPageGaps(file);
    assert.deepEqual({ complete: again.complete, scrubbed: again.scrubbed }, { complete: true, scrubbed: 0 }, 'a second pass finds nothing');
  } finally {
    db.close();
    rmSync(join(file, '..'), { recursive: true, force: true });
  }
});

test('a connection that had the old pages cached does not write the old bytes back after the scrub', async () => {
  const { file, db } = fileWithOldCopies();
  const other = open(file);
  try {
    other.pragma('cache_size = -65536');
    contents(other); // every page in its cache, old bytes included
    // A transaction of `other` after the scrub rewrites every page in place (same-size updates: no
    // page is rebuilt), from its cache unless the scrub made it drop the cache.
    assert.equal((await scrubPageGaps(file)).complete, true);
    other.transaction(() => {
      other.prepare("UPDATE records SET body = replace(body, 'b', 'c')").run();
      other.prepare("UPDATE links SET identifier = replace(identifier, 'id-', 'ix-')").run();
    })();
    other.pragma('wal_checkpoint(TRUNCATE)');
    assert.equal(marksLeft(file), 0);
    assert.equal(db.pragma('integrity_check', { simple: true }), 'ok');
  } finally {
    other.close();
    db.close();
    rmSync(join(file, '..'), { recursive: true, force: true });
  }
});

test('writers of another thread go on through a scrub in small chunks: none of their rows is lost, no deleted byte is left', async () => {
  const file = freshFile();
  const db = open(file);
  db.exec(SCHEMA);
  const marked = insertRows(db, 'a', 8000, 2, 5);
  deleteRows(db, marked);
  const source = `
    const { parentPort, workerData } = require('node:worker_threads');
    const Database = require(workerData.module);
    const db = new Database(workerData.file);
    db.pragma('busy_timeout = 5000');
    db.pragma('secure_delete = ON');
    const insert = db.prepare("INSERT INTO records (key, body) VALUES (?, ?)");
    let n = 0;
    let stop = false;
    parentPort.on('message', () => { stop = true; });
    (function batch() {
      if (stop) { db.close(); parentPort.postMessage(n); return; }
      db.transaction(() => { for (let i = 0; i < 50; i++) insert.run('w-' + (n++) + '-' + 'k'.repeat(30), 'v'.repeat(60)); })();
      setImmediate(batch);
    })();`;
  const writer = new Worker(source, { eval: true, workerData: { file, module: createRequire(import.meta.url).resolve('better-sqlite3') } });
  try {
    await new Promise((r) => setTimeout(r, 100));
    const result = await scrubPageGaps(file, { chunkBytes: 16 * 4096, chunkPauseMs: 5 });
    assert.equal(result.complete, true);
    const written = await new Promise<number>((resolve) => {
      writer.once('message', resolve);
      writer.postMessage('stop');
    });
    assert.ok(written > 0);
    assert.equal(await clearOldCopies(db), true);
    assert.equal(marksLeft(file), 0);
    assert.equal(db.pragma('integrity_check', { simple: true }), 'ok');
    assert.equal(db.prepare("SELECT count(*) FROM records WHERE key LIKE 'w-%'").pluck().get(), written, 'every row the writer committed is there');
  } finally {
    await writer.terminate();
    db.close();
    rmSync(join(file, '..'), { recursive: true, force: true });
  }
});

test('model: any interleaving of inserts, deletes and scrubs keeps every row that was not deleted, and clearOldCopies leaves no deleted byte', async () => {
  const op = fc.oneof(
    fc.record({ kind: fc.constant('insert' as const), count: fc.integer({ min: 1, max: 1500 }), markEvery: fc.integer({ min: 1, max: 6 }) }),
    fc.record({ kind: fc.constant('delete' as const), share: fc.double({ min: 0.1, max: 1, noNaN: true }) }),
    fc.record({ kind: fc.constant('scrub' as const), chunkPages: fc.integer({ min: 1, max: 64 }) }),
  );
  await fc.assert(
    fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 10 }), fc.integer({ min: 0, max: 1000 }), async (ops, seed) => {
      const file = freshFile();
      const db = open(file);
      try {
        db.exec(SCHEMA);
        const live: string[] = [];
        let batch = 0;
        for (const o of ops) {
          if (o.kind === 'insert') live.push(...insertRows(db, `b${batch++}-`, o.count, o.markEvery, seed));
          else if (o.kind === 'delete') deleteRows(db, live.splice(0, Math.ceil(live.length * o.share)));
          else assert.equal((await scrubPageGaps(file, { chunkBytes: o.chunkPages * 4096, chunkPauseMs: 1 })).complete, true);
        }
        deleteRows(db, live);
        const kept = contents(db);
        assert.equal(await clearOldCopies(db), true);
        assert.equal(marksLeft(file), 0, 'no byte of a deleted row');
        assert.equal(db.pragma('integrity_check', { simple: true }), 'ok');
        assert.equal(contents(db), kept, 'the rows that were not deleted are as they were');
      } finally {
        db.close();
        rmSync(join(file, '..'), { recursive: true, force: true });
      }
    }),
    { numRuns: 25 },
  );
});

test('a file not in WAL mode is refused, not guessed at', async () => {
  const file = freshFile();
  const db = new Database(file);
  db.exec(SCHEMA);
  db.close();
  try {
    await assert.rejects(scrubPageGaps(file), (error: Error) => error instanceof ScrubRefusedError && /not in WAL mode/.test(error.message));
  } finally {
    rmSync(join(file, '..'), { recursive: true, force: true });
  }
});

/** The smallest and largest rowid on a table leaf page (cells: payload size varint, rowid varint). */
function rowidRange(file: string, pageno: number): [number, number] {
  const page = readFileSync(file).subarray((pageno - 1) * 4096, pageno * 4096);
  const varint = (at: number): [number, number] => {
    let v = 0;
    for (let i = 0; i < 8; i++) {
      const byte = page[at + i]!;
      v = v * 128 + (byte & 0x7f);
      if (!(byte & 0x80)) return [v, at + i + 1];
    }
    return [v * 256 + page[at + 8]!, at + 9];
  };
  const cells = (page[3]! << 8) | page[4]!;
  const ids: number[] = [];
  for (let c = 0; c < cells; c++) ids.push(varint(varint((page[8 + 2 * c]! << 8) | page[9 + 2 * c]!)[1])[0]);
  return [Math.min(...ids), Math.max(...ids)];
}

/** The b-tree leaves of table `t` in key order, with their parent's path (dbstat). */
function leavesOf(db: Database.Database): { pageno: number; parent: string }[] {
  const rows = db.prepare("SELECT pageno, path FROM dbstat WHERE name = 't' AND pagetype = 'leaf' ORDER BY path").all() as { pageno: number; path: string }[];
  return rows.map((r) => ({ pageno: r.pageno, parent: r.path.slice(0, r.path.lastIndexOf('/', r.path.length - 2) + 1) }));
}

/** Where the marker is in an unallocated space: page numbers. */
function markedGaps(file: string, pageSize: number): number[] {
  const bytes = readFileSync(file);
  const pages: number[] = [];
  for (let i = bytes.indexOf(MARK); i >= 0; i = bytes.indexOf(MARK, i + 1)) {
    const no = Math.floor(i / pageSize) + 1;
    const gap = unallocatedSpace(bytes.subarray((no - 1) * pageSize, no * pageSize), no === 1 ? 100 : 0, pageSize);
    if (gap && i % pageSize >= gap[0] && i % pageSize < gap[1]) pages.push(no);
  }
  return pages;
}

test('a split between two chunks that moves an old copy to a page already swept: the whole-file sweep still leaves none', async () => {
  // balance_nonroot gives the siblings' page buffers (unallocated space included) new page numbers
  // in key order, so an old copy on page H, not swept yet, can land on a lower page the first pass
  // has done. Set up: the copy on H, a sibling C of H overflowed between the chunks [1, H-1] and
  // [H, end] so that H's buffer goes to a lower number.
  let trials = 0;
  for (let seed = 1; seed <= 30 && trials < 3; seed++) {
    const file = freshFile();
    const db = open(file);
    try {
      db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, b TEXT)');
      let x = seed * 7919;
      const next = () => ((x = (Math.imul(x, 1103515245) + 12345) >>> 0), x >>> 8);
      const insert = db.prepare('INSERT OR IGNORE INTO t VALUES (?, ?)');
      db.transaction(() => {
        for (let i = 0; i < 4000; i++) {
          const id = next() % 1e6;
          insert.run(id, (id % 2 ? MARK : '') + 'b'.repeat(40 + ((i * 7) % 90)));
        }
        for (let i = 0; i < 8000; i++) insert.run((next() % 5e5) * 2, 'b'.repeat(40 + ((i * 7) % 90)));
      })();
      db.exec('DELETE FROM t WHERE id % 2 = 1');
      db.pragma('wal_checkpoint(TRUNCATE)');
      const leaves = leavesOf(db);
      let plan: { h: number; c: number } | null = null;
      for (const h of markedGaps(file, 4096)) {
        const at = leaves.findIndex((l) => l.pageno === h);
        for (const c of [at - 1, at + 1]) {
          const set = [c - 1, c, c + 1].map((j) => leaves[j]);
          if (at < 0 || !leaves[c] || set.some((l) => !l || l.parent !== leaves[c]!.parent)) continue;
          const sorted = set.map((l) => l!.pageno).sort((a, b) => a - b);
          if (sorted[set.findIndex((l) => l!.pageno === h)]! < h) plan = { h, c: leaves[c]!.pageno };
          if (plan) break;
        }
        if (plan) break;
      }
      if (!plan) continue;
      trials++;
      const writer = open(file);
      const cellsOf = writer.prepare('SELECT ncell FROM dbstat WHERE pageno = ?').pluck();
      const scrub = scrubPageGaps(file, { chunkBytes: (plan.h - 1) * 4096, chunkPauseMs: 400 });
      await new Promise((r) => setTimeout(r, 150)); // the first chunk [1, H-1] is swept, the lock let go
      const span = rowidRange(file, plan.c);
      const add = writer.prepare('INSERT OR IGNORE INTO t VALUES (?, ?)');
      for (let id = span[0] + 1, before = cellsOf.get(plan.c) as number; id < span[1]; id += 2) {
        add.run(id, 'c'.repeat(90));
        const now = cellsOf.get(plan.c) as number;
        if (now < before) break; // C overflowed: the siblings were rebalanced
        before = now;
      }
      const result = await scrub;
      assert.equal(result.complete, true);
      writer.pragma('wal_checkpoint(TRUNCATE)');
      assert.equal(marksLeft(file), 0, `an old copy left after a complete scrub (it was on page ${plan.h})`);
      assert.equal(writer.pragma('integrity_check', { simple: true }), 'ok');
      writer.close();
    } finally {
      db.close();
      rmSync(join(file, '..'), { recursive: true, force: true });
    }
  }
  assert.ok(trials > 0, 'no seed gave the case');
});

test("the scrub keeps this process's SQLite locks: another process cannot take the file exclusively afterwards", async () => {
  const file = freshFile();
  const db = open(file);
  try {
    db.exec(SCHEMA);
    deleteRows(db, insertRows(db, 'a', 2000, 2, 9));
    db.prepare('SELECT count(*) FROM records').get(); // a connection that has read: it holds its shared lock
    assert.equal((await scrubPageGaps(file)).complete, true);
    // Closing any descriptor of the file would drop every POSIX lock this process holds on it,
    // SQLite's included; then a process in exclusive locking mode gets in beside this connection.
    const other = spawnSync(
      process.execPath,
      [
        '-e',
        `const Database = require(${JSON.stringify(createRequire(import.meta.url).resolve('better-sqlite3'))});
         const db = new Database(${JSON.stringify(file)});
         db.pragma('busy_timeout = 0');
         try { db.pragma('locking_mode = EXCLUSIVE'); db.exec('BEGIN EXCLUSIVE'); db.exec("INSERT INTO records VALUES ('x', 'y')"); db.exec('COMMIT'); console.log('got in'); }
         catch (error) { console.log(error.code); }`,
      ],
      { encoding: 'utf8' },
    );
    assert.equal(other.stdout.trim(), 'SQLITE_BUSY', `another process in exclusive mode: ${other.stdout}${other.stderr}`);
  } finally {
    db.close();
    rmSync(join(file, '..'), { recursive: true, force: true });
  }
});
