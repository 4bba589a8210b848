/**
 * A compact, exact table of one data set's identifier links (identifier → identity key), held off
 * the V8 heap in typed arrays, for the consumer's hot state (view-hot-state.ts). Issue 30: a JS Map
 * of strings costs ~145 bytes of heap per link plus the GC work of a large old generation (959 MB
 * peak RSS at 1.2 million links), so a data set of a million identifiers fitted no practical bound;
 * here a link costs ~52-56 bytes (48 in its entry, 4-8 in the bucket index), none of it scanned by
 * the garbage collector.
 *
 * Keys. An identifier (merged-view/identity.ts `identifiersOf`) is a typed string such as
 * `email:<64 hex>`. It is stored as a tag and 32 bytes (nine 32-bit words), exactly:
 * - `email:`, `phone:`, `cid:`, `uid:` followed by 64 lowercase hex digits (the SHA-256 digests
 *   ECAPI asks senders to send, lowercased by normalization): the digest's own 32 bytes, tags 1-4;
 * - `ifa:` followed by a canonical lowercase UUID (8-4-4-4-12 hex): its 16 bytes, tag 5;
 * - anything else (a customer identifier or uid that is not a digest, any other ifa): SHA-256 of
 *   the whole identifier string, tag 6. Two such identifiers share a key only if their SHA-256
 *   digests collide, which nobody can arrange; the other kinds are encoded without loss.
 * So equal keys mean equal identifiers, and a lookup that finds nothing is a true absence. Values
 * are the queue positions of the identity keys (`ik_<seq>`, model/identity-key.ts) as float64 (exact up to 2^53); a key of another form is not taken (`set`
 * answers false and the caller stops holding the data set).
 *
 * Layout: entries (nine key words, the index of the next entry of the same bucket, a float64 value)
 * are appended to fixed-size chunks of typed arrays and never move; a bucket index (Int32Array, a
 * power of two, at least one bucket per entry) points to each bucket's first entry. Growing
 * re-chains the entries into a bucket index twice the size: only that index (4 bytes a bucket) is
 * reallocated, so there is no moment with two copies of the table (a rehashed open-addressing table
 * held 2.5 times its size at each growth: +110 MB of peak RSS at a million links).
 *
 * Hazards and how they are bounded:
 * - Hash flooding. Senders choose their identifiers (a "digest" is any 64 hex digits), so they can
 *   aim many keys at one bucket of a known hash. The bucket hash mixes all nine words with a random
 *   seed per table, and a chain longer than `maxProbe` entries makes `set` answer false: the caller
 *   then drops the data set from the hot state and reads its links from the file as before. A
 *   crafted data set costs its own consumer the hot path, never correctness, and tables are per
 *   data set, so it cannot touch another sender's.
 * - Memory. A data set's table holds at most one chunk (256 entries, 12 KiB) more than it needs,
 *   and its bucket index (256 bytes at the least); the bound in links is the caller's (view-hot-state.ts), `byteSize` what
 *   the table holds.
 */
import { hash, randomBytes } from 'node:crypto';
import { identityKeyFor, identityKeySeq } from '../model/identity-key.js';

/** 32-bit words of a key: the tag, then 32 bytes. */
const KEY_WORDS = 9;
/** 32-bit words of an entry: the key, then the index of the next entry in its bucket (-1: none). */
const ENTRY_WORDS = KEY_WORDS + 1;
const NEXT = KEY_WORDS;
/**
 * Entries per chunk (a power of two): 256, 12 KiB. Small enough that a partition holding many small
 * data sets pays little for each (a table takes a chunk at its first link), large enough that the
 * two typed arrays of a chunk (~200 bytes of heap objects) cost under a byte a link.
 */
const CHUNK_BITS = 8;
const CHUNK = 1 << CHUNK_BITS;
const CHUNK_MASK = CHUNK - 1;
const MIN_BUCKETS = 64;
/** Longest chain a bucket may have; `set` gives up rather than make one longer (hash flooding). */
export const DEFAULT_MAX_PROBE = 64;

const TAG_OTHER = 6;

/** Value of each lowercase hex digit by char code, -1 for any other character. */
const HEX = new Int8Array(128).fill(-1);
for (let c = 48; c <= 57; c++) HEX[c] = c - 48;
for (let c = 97; c <= 102; c++) HEX[c] = c - 87;

/** Reads `words` words of lowercase hex from `s` at `at` into `out` from index 1; false on any other character. */
function readHexWords(s: string, at: number, out: Uint32Array, words: number): boolean {
  for (let w = 0; w < words; w++) {
    let word = 0;
    for (let end = at + 8; at < end; at++) {
      const c = s.charCodeAt(at);
      const v = c < 128 ? HEX[c]! : -1;
      if (v < 0) return false;
      word = (word << 4) | v;
    }
    out[1 + w] = word;
  }
  return true;
}

/** Reads a canonical lowercase UUID (8-4-4-4-12 hex) from `s` at `at` into `out[1..4]`; false if it is not one. */
function readUuid(s: string, at: number, out: Uint32Array): boolean {
  if (s.charCodeAt(at + 8) !== 45 || s.charCodeAt(at + 13) !== 45 || s.charCodeAt(at + 18) !== 45 || s.charCodeAt(at + 23) !== 45) return false;
  // The 32 digits without the dashes: 8 | 4+4 | 4+4 | 12.
  const digits = s.slice(at, at + 8) + s.slice(at + 9, at + 13) + s.slice(at + 14, at + 18) + s.slice(at + 19, at + 23) + s.slice(at + 24, at + 36);
  return readHexWords(digits, 0, out, 4);
}

/**
 * Prefixes of the digest-typed identifiers, indexed by their tag (1-4). The embedded view stores such
 * an identifier as this tag and its 32 bytes (identifier-link-columns.ts), the same words as a key
 * here, so both take the numbering from this one place.
 */
export const DIGEST_PREFIXES: readonly string[] = ['', 'email:', 'phone:', 'cid:', 'uid:'];

/** Tag of a digest-typed identifier by its first character and length, or 0 (its 64 digits are not checked). */
export function digestTag(identifier: string): number {
  switch (identifier.charCodeAt(0)) {
    case 101: // e
      return identifier.length === 70 && identifier.startsWith('email:') ? 1 : 0;
    case 112: // p
      return identifier.length === 70 && identifier.startsWith('phone:') ? 2 : 0;
    case 99: // c
      return identifier.length === 68 && identifier.startsWith('cid:') ? 3 : 0;
    case 117: // u
      return identifier.length === 68 && identifier.startsWith('uid:') ? 4 : 0;
    default:
      return 0;
  }
}

/**
 * Tag of an identifier that `encodeIdentifier` encodes as a digest (1-4): the digest form with 64
 * lowercase hex digits; 0 for any other. The embedded view stores exactly these as 33 bytes
 * (identifier-link-columns.ts), so both sides decide by this one check.
 */
export function hexDigestTag(identifier: string): number {
  const tag = digestTag(identifier);
  if (tag === 0) return 0;
  for (let i = identifier.length - 64; i < identifier.length; i++) {
    const c = identifier.charCodeAt(i);
    if (c >= 128 || HEX[c]! < 0) return 0;
  }
  return tag;
}

/** Encodes `identifier` into `out[0..8]` (tag, then 32 bytes as eight big-endian words). Exact (see the note on top). */
export function encodeIdentifier(identifier: string, out: Uint32Array): void {
  const tag = digestTag(identifier);
  if (tag !== 0 && readHexWords(identifier, identifier.length - 64, out, 8)) {
    out[0] = tag;
    return;
  }
  if (identifier.length === 40 && identifier.startsWith('ifa:') && readUuid(identifier, 4, out)) {
    out[0] = 5;
    out[5] = out[6] = out[7] = out[8] = 0;
    return;
  }
  const digest = hash('sha256', identifier, 'buffer');
  out[0] = TAG_OTHER;
  for (let w = 0; w < 8; w++) out[1 + w] = digest.readUInt32BE(4 * w);
}

/**
 * Encodes a link's identifier as a view file stores it (merged-view/identifier-link-columns.ts): its
 * text as `encodeIdentifier` does, or a stored digest (33 bytes: the kind's tag, 1-4 as here, and the
 * 32 digest bytes) straight into the same words, so a full load from the file decodes nothing.
 */
export function encodeStoredIdentifier(identifier: string | Uint8Array, out: Uint32Array): void {
  if (typeof identifier === 'string') return encodeIdentifier(identifier, out);
  out[0] = identifier[0]!;
  for (let w = 0, at = 1; w < 8; w++, at += 4) out[1 + w] = ((identifier[at]! << 24) | (identifier[at + 1]! << 16) | (identifier[at + 2]! << 8) | identifier[at + 3]!) >>> 0;
}

/** A table's hash seed: from the system's CSPRNG, so that no sender can learn or predict it. */
function randomSeed(): number {
  return randomBytes(4).readUInt32LE(0);
}

export class IdentifierLinkTable {
  readonly #seed: number;
  readonly #maxProbe: number;
  /** Entry chunks: ENTRY_WORDS words an entry, and the values. */
  readonly #keys: Uint32Array[] = [];
  readonly #values: Float64Array[] = [];
  /** First entry of each bucket, -1 for none; its length is a power of two. */
  #buckets: Int32Array;
  #size = 0;
  /** Scratch key for lookups (no allocation per call). */
  readonly #key = new Uint32Array(KEY_WORDS);

  constructor(options: { capacity?: number; maxProbe?: number; seed?: number } = {}) {
    this.#seed = options.seed ?? randomSeed();
    this.#maxProbe = options.maxProbe ?? DEFAULT_MAX_PROBE;
    let buckets = MIN_BUCKETS;
    while (buckets < (options.capacity ?? 0)) buckets *= 2;
    this.#buckets = new Int32Array(buckets).fill(-1);
  }

  get size(): number {
    return this.#size;
  }

  /** Bytes the table's arrays hold (its memory, off the V8 heap). */
  get byteSize(): number {
    return this.#buckets.byteLength + this.#keys.length * CHUNK * (ENTRY_WORDS * 4 + 8);
  }

  /** The identity key `identifier` links to, or undefined when it has no link. */
  get(identifier: string): string | undefined {
    const key = this.#key;
    encodeIdentifier(identifier, key);
    const entry = this.#find(key, this.#bucketOf(key));
    return entry >= 0 ? identityKeyFor(this.#values[entry >>> CHUNK_BITS]![entry & CHUNK_MASK]!) : undefined;
  }

  /**
   * Links `identifier` to `identityKey` (a link never changes once written: a second set of the same
   * identifier keeps the value given last). Answers false, changing nothing, when the key is not of
   * the `ik_<seq>` form or its bucket's chain is already `maxProbe` long (so no chain is ever
   * longer, and re-chaining only splits chains): the caller must then stop relying on this table.
   * Either may come as a view file stores it (identifier-link-columns.ts): a digest's 33 bytes, a seq.
   */
  set(identifier: string | Uint8Array, identityKey: string | number): boolean {
    const seq = typeof identityKey === 'number' ? identityKey : identityKeySeq(identityKey);
    if (seq < 0 || !Number.isSafeInteger(seq)) return false;
    const key = this.#key;
    encodeStoredIdentifier(identifier, key);
    const bucket = this.#bucketOf(key);
    const found = this.#find(key, bucket);
    if (found >= 0) {
      this.#values[found >>> CHUNK_BITS]![found & CHUNK_MASK] = seq;
      return true;
    }
    if (-1 - found >= this.#maxProbe) return false; // a chain is never longer than maxProbe
    const entry = this.#size;
    const chunk = entry >>> CHUNK_BITS;
    if (chunk === this.#keys.length) {
      this.#keys.push(new Uint32Array(CHUNK * ENTRY_WORDS));
      this.#values.push(new Float64Array(CHUNK));
    }
    const keys = this.#keys[chunk]!;
    const at = (entry & CHUNK_MASK) * ENTRY_WORDS;
    keys.set(key, at);
    keys[at + NEXT] = this.#buckets[bucket]!;
    this.#buckets[bucket] = entry;
    this.#values[chunk]![entry & CHUNK_MASK] = seq;
    this.#size++;
    if (this.#size > this.#buckets.length) this.#rechain();
    return true;
  }

  /** The entry holding `key` in `bucket`'s chain, or, when it is not there, -1 - the chain's length. */
  #find(key: Uint32Array, bucket: number): number {
    let entry = this.#buckets[bucket]!;
    let length = 0;
    while (entry >= 0) {
      const keys = this.#keys[entry >>> CHUNK_BITS]!;
      const at = (entry & CHUNK_MASK) * ENTRY_WORDS;
      if (
        keys[at] === key[0] && keys[at + 1] === key[1] && keys[at + 2] === key[2] && keys[at + 3] === key[3] && keys[at + 4] === key[4] &&
        keys[at + 5] === key[5] && keys[at + 6] === key[6] && keys[at + 7] === key[7] && keys[at + 8] === key[8]
      ) {
        return entry;
      }
      entry = keys[at + NEXT]! | 0;
      length++;
    }
    return -1 - length;
  }

  /** Bucket of a key: every word mixed with the table's seed (murmur3's constants), masked to the index. */
  #bucketOf(key: Uint32Array | ArrayLike<number>, at = 0, mask = this.#buckets.length - 1): number {
    let h = this.#seed;
    for (let w = 0; w < KEY_WORDS; w++) {
      let k = Math.imul(key[at + w]!, 0xcc9e2d51);
      k = Math.imul((k << 15) | (k >>> 17), 0x1b873593);
      h ^= k;
      h = Math.imul((h << 13) | (h >>> 19), 5) + 0xe6546b64;
    }
    h ^= h >>> 16;
    h = Math.imul(h, 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h ^= h >>> 16;
    return h & mask;
  }

  /** Twice the buckets; every entry re-chained in place (entries never move). */
  #rechain(): void {
    const buckets = new Int32Array(this.#buckets.length * 2).fill(-1);
    const mask = buckets.length - 1;
    for (let entry = 0; entry < this.#size; entry++) {
      const keys = this.#keys[entry >>> CHUNK_BITS]!;
      const at = (entry & CHUNK_MASK) * ENTRY_WORDS;
      const bucket = this.#bucketOf(keys, at, mask);
      keys[at + NEXT] = buckets[bucket]!;
      buckets[bucket] = entry;
    }
    this.#buckets = buckets;
  }
}
