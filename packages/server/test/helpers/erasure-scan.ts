/**
 * The erasure check of the lifecycle tests: every byte of every file under a data dir, whatever the
 * files are called (view partitions, their -wal and -shm, queue.db and its body log, lifecycle.db,
 * control.db, a layout that does not exist yet), searched for what a deletion must have removed.
 *
 * An identifier digest (a SHA-256 hex string as sent) is searched as sent in lower and upper case
 * and as its 32 raw bytes (a store may keep it binary); an event id as its UTF-8 bytes. Use ids and
 * digests long and random enough never to occur by chance.
 */
import { lstatSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { cli, exportQueue } from './server-process.js';
import { waitFor } from './fault-tools.js';

export interface Needle {
  readonly label: string;
  readonly bytes: Buffer;
}

/** The forms a digest may be stored in. */
export function digestNeedles(label: string, hex: string): Needle[] {
  return [
    { label: `${label} (hex)`, bytes: Buffer.from(hex.toLowerCase()) },
    { label: `${label} (HEX)`, bytes: Buffer.from(hex.toUpperCase()) },
    { label: `${label} (raw)`, bytes: Buffer.from(hex, 'hex') },
  ];
}

export function textNeedle(label: string, text: string): Needle {
  return { label, bytes: Buffer.from(text, 'utf8') };
}

/** Every regular file under `dir`, recursively (symlinks not followed). */
export function filesUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    let names: string[];
    try {
      names = readdirSync(d);
    } catch {
      return; // removed meanwhile
    }
    for (const name of names) {
      const path = join(d, name);
      let st;
      try {
        st = lstatSync(path);
      } catch {
        continue;
      }
      if (st.isDirectory()) walk(path);
      else if (st.isFile()) out.push(path);
    }
  };
  walk(dir);
  return out.sort();
}

/** Every file under `dataDir` with its bytes (a file unlinked meanwhile is skipped: its bytes are gone with it). */
function* filesWithBytes(dataDir: string): Generator<{ file: string; bytes: Buffer }> {
  for (const file of filesUnder(dataDir)) {
    let bytes: Buffer;
    try {
      bytes = readFileSync(file);
    } catch {
      continue;
    }
    yield { file, bytes };
  }
}

/** Where any needle occurs: "file: label" lines (empty when nothing is left). */
export function residue(dataDir: string, needles: readonly Needle[]): string[] {
  const found: string[] = [];
  for (const { file, bytes } of filesWithBytes(dataDir)) {
    for (const needle of needles) {
      const at = bytes.indexOf(needle.bytes);
      if (at >= 0) {
        let n = 0;
        for (let i = at; i >= 0; i = bytes.indexOf(needle.bytes, i + 1)) n++;
        found.push(`${relative(dataDir, file)}: ${needle.label} ×${n}`);
      }
    }
  }
  return found;
}

/**
 * Where in an SQLite file (page, b-tree page type, region) each occurrence of a needle is: `gap` is
 * a b-tree page's unallocated space between its cell pointer array and its cell content area,
 * `freeblock` a freed cell, `cell` live content; other pages (overflow, freelist) are `page`. Files
 * that are not SQLite databases (a -wal, the body log) are `file`.
 */
export function locate(dataDir: string, needles: readonly Needle[]): string[] {
  const out: string[] = [];
  for (const { file, bytes } of filesWithBytes(dataDir)) {
    const isDb = bytes.subarray(0, 16).toString('latin1') === 'SQLite format 3\0';
    const pageSize = isDb ? (bytes.readUInt16BE(16) === 1 ? 65536 : bytes.readUInt16BE(16)) : 0;
    for (const needle of needles) {
      for (let at = bytes.indexOf(needle.bytes); at >= 0; at = bytes.indexOf(needle.bytes, at + 1)) {
        let where = 'file';
        if (isDb) {
          const page = Math.floor(at / pageSize);
          const base = page * pageSize;
          const hdr = base + (page === 0 ? 100 : 0);
          const type = bytes[hdr]!;
          const off = at - base;
          if (type === 2 || type === 5 || type === 10 || type === 13) {
            const headerSize = type === 2 || type === 5 ? 12 : 8;
            const cells = bytes.readUInt16BE(hdr + 3);
            const ptrEnd = hdr - base + headerSize + 2 * cells;
            const contentStart = bytes.readUInt16BE(hdr + 5) || 65536;
            const free: [number, number][] = [];
            for (let fb = bytes.readUInt16BE(hdr + 1), n = 0; fb !== 0 && n < 1000; fb = bytes.readUInt16BE(base + fb), n++) free.push([fb, fb + bytes.readUInt16BE(base + fb + 2)]);
            const region = off >= ptrEnd && off < contentStart ? 'gap' : free.some(([a, b]) => off >= a && off < b) ? 'freeblock' : 'cell';
            where = `page ${page + 1} type ${type} ${region}`;
          } else where = `page ${page + 1} (not a b-tree page)`;
        }
        out.push(`${relative(dataDir, file)}: ${needle.label} at ${where}`);
      }
    }
  }
  return out;
}

/** Waits until retention has deleted the record of event `id` from the view and its queued copy (30 s at most). */
export async function untilRetentionDeleted(dataDir: string, dataSetId: string, id: string): Promise<void> {
  await waitFor(
    'retention to delete the records from the view and the queue',
    async () => {
      const inView = (await cli(dataDir, ['--json', 'events', 'get', dataSetId, id])).code === 0;
      const inQueue = (await exportQueue(dataDir)).some((r) => r.event.id === id);
      return !inView && !inQueue;
    },
    30_000,
    250,
  );
}
