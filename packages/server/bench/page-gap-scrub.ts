/**
 * The page-gap scrub (fs/page-gap-scrub.ts): what one pass over an SQLite file costs, and how long a
 * writer of another thread (the consumer, ingest) waits for its lock meanwhile.
 *
 * A WAL file of about BENCH_SCRUB_MB (800) MB is built from random-key inserts into a WITHOUT
 * ROWID table and an index (pages split all over, so most have old bytes in their unallocated
 * space), then scrubbed three times: the first scrub (most pages need zeroing), a second (none do:
 * what a scrub after a small deletion costs), and a third while a writer thread commits a 200-row
 * transaction every 10 ms, as a consumer's batches do (its commits' time, including the wait for the
 * lock, is reported: median, p99, longest).
 *
 *   node packages/server/dist/bench/page-gap-scrub.js
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { scrubPageGaps, type ScrubResult } from '../src/fs/page-gap-scrub.js';

const targetMb = Number(process.env.BENCH_SCRUB_MB ?? 800);
const dir = mkdtempSync(join(tmpdir(), 'ecapi-bench-scrub-'));
const file = join(dir, 'view.db');

async function timed(label: string): Promise<ScrubResult> {
  const wall = process.hrtime.bigint();
  const cpu = process.cpuUsage();
  const result = await scrubPageGaps(file);
  const used = process.cpuUsage(cpu);
  const ms = Number(process.hrtime.bigint() - wall) / 1e6;
  console.log(`${label}: ${(ms / 1000).toFixed(2)} s wall, ${((used.user + used.system) / 1e6).toFixed(2)} s CPU; ${result.pages} b-tree pages read (both passes), ${result.scrubbed} zeroed (${(result.bytes / 1e6).toFixed(1)} MB); the whole-file sweep held the lock ${result.finalHoldMs.toFixed(0)} ms`);
  return result;
}

try {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = OFF');
  db.exec('CREATE TABLE records (key TEXT PRIMARY KEY, body TEXT) WITHOUT ROWID; CREATE TABLE links (id INTEGER PRIMARY KEY, identifier TEXT, record TEXT); CREATE INDEX links_by_identifier ON links (identifier, record)');
  const record = db.prepare('INSERT INTO records VALUES (?, ?)');
  const link = db.prepare('INSERT INTO links (identifier, record) VALUES (?, ?)');
  let n = 0;
  while (statSync(file).size < targetMb * 1e6) {
    db.transaction(() => {
      for (let i = 0; i < 20_000; i++, n++) {
        const key = `${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`;
        record.run(key, 'x'.repeat(400 + (n % 300)));
        link.run(`${key.slice(0, 8)}${Math.random()}`, key);
      }
    })();
    db.pragma('wal_checkpoint(TRUNCATE)');
  }
  db.close();
  console.log(`file: ${(statSync(file).size / 1e6).toFixed(0)} MB, ${n} rows (Node ${process.version})`);
  await timed('first scrub');
  await timed('second scrub');

  const source = `
    const { parentPort, workerData } = require('node:worker_threads');
    const Database = require(workerData.module);
    const db = new Database(workerData.file);
    db.pragma('busy_timeout = 10000');
    const insert = db.prepare('INSERT INTO records VALUES (?, ?)');
    let stop = false;
    const times = [];
    parentPort.on('message', () => { stop = true; });
    (function batch() {
      if (stop) { db.close(); parentPort.postMessage(times); return; }
      const t = process.hrtime.bigint();
      db.transaction(() => { for (let i = 0; i < 200; i++) insert.run('w' + times.length + '-' + i + Math.random(), 'v'.repeat(500)); })();
      times.push(Number(process.hrtime.bigint() - t) / 1e6);
      setTimeout(batch, 10);
    })();`;
  const writer = new Worker(source, { eval: true, workerData: { file, module: createRequire(import.meta.url).resolve('better-sqlite3') } });
  await new Promise((r) => setTimeout(r, 1000));
  await timed('third scrub, a writer thread committing');
  const times = await new Promise<number[]>((resolve) => {
    writer.once('message', resolve);
    writer.postMessage('stop');
  });
  await writer.terminate();
  times.sort((a, b) => a - b);
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))]!.toFixed(1);
  console.log(`writer: ${times.length} commits (from 1 s before the scrub to its end): median ${at(0.5)} ms, p99 ${at(0.99)} ms, longest ${at(1)} ms`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
