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

/** Where any needle occurs: "file: label" lines (empty when nothing is left). */
export function residue(dataDir: string, needles: readonly Needle[]): string[] {
  const found: string[] = [];
  for (const file of filesUnder(dataDir)) {
    let bytes: Buffer;
    try {
      bytes = readFileSync(file);
    } catch {
      continue; // unlinked meanwhile: its bytes are gone with it
    }
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
