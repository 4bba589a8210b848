/**
 * How an embedded view file stores an identifier link (`identity_identifiers`: data set,
 * identifier, identity key), compactly: issue 30's "fixed-size binary keys" in the B-tree that the
 * consumer writes most (about one new link per event).
 *
 * - identifier: `email:`, `phone:`, `cid:` or `uid:` followed by 64 lowercase hex digits (the
 *   SHA-256 digests ECAPI asks senders to send, lowercased by normalization) is a 33-byte BLOB: a
 *   tag byte (1-4), then the digest's 32 bytes. Any other identifier (a customer identifier or uid
 *   that is not such a digest, an ifa) is the TEXT it is. Both ways are exact: decoding gives the
 *   identifier back, and as an identifier always takes the same form, equal identifiers have equal
 *   column values (SQLite never finds a BLOB equal to a TEXT).
 * - identity key: `ik_<seq>` (model/identity-key.ts, the form the identity forest makes) is the
 *   INTEGER seq; a key of another form (the store contract allows any string) is its TEXT, which
 *   never begins with `ik_`.
 * Neither column has a declared type, so SQLite stores each value as it is given (no affinity).
 *
 * Against the text columns of earlier versions (`email:<64 hex>` as 70 characters, `ik_<seq>` as
 * text), a link's row and its index entry are about half the size: 17-20% fewer bytes written per
 * event; ~7% less CPU per event for one data set of 200,000 events, whose links then fit the page
 * cache better, none measurable at a million, where every new link dirties a page of its own in
 * either form (bench/README.md, "Compact identifier links").
 *
 * Migration: a view file made by an earlier version has TEXT columns. Every connection that reads or
 * writes links (the view store's, the lifecycle's eraser) calls `migrateIdentifierLinks` when it opens
 * the file, so no code reads the earlier form: in one IMMEDIATE transaction the rows are rewritten
 * into a table of this form, which takes the old one's name (secure_delete is on, so the old pages
 * are zeroed as they are freed). The declared type of the `identity_key` column (TEXT before, none
 * now) says which form a file has; a CHECK on it makes a writer of an earlier version still running
 * against a migrated file fail loudly (it inserts `ik_<seq>` as text) rather than write links this
 * version would not find.
 */
import type Database from 'better-sqlite3';
import { identityKeyFor, identityKeySeq } from '../model/identity-key.js';
import { DIGEST_PREFIXES, hexDigestTag } from './identifier-link-table.js';

/** The compact form's table. */
const LINKS_TABLE = (name: string) => `CREATE TABLE IF NOT EXISTS ${name} (
  data_set_id TEXT NOT NULL,
  identifier NOT NULL,
  identity_key NOT NULL CHECK (typeof(identity_key) = 'integer' OR (typeof(identity_key) = 'text' AND substr(identity_key, 1, 3) <> 'ik_')),
  PRIMARY KEY (data_set_id, identifier)
) WITHOUT ROWID;`;

/** The table and its index by identity (the lifecycle's erasers and `identities get` read links by identity). */
export const IDENTIFIER_LINKS_SCHEMA = `${LINKS_TABLE('identity_identifiers')}
CREATE INDEX IF NOT EXISTS identity_identifiers_key ON identity_identifiers (data_set_id, identity_key);`;

/** A stored identifier: a 33-byte BLOB or the identifier's text. */
export type StoredIdentifier = Buffer | string;

const DIGEST_LENGTH = 32;

/** The stored form of an identifier. */
export function storedIdentifier(identifier: string): StoredIdentifier {
  const tag = hexDigestTag(identifier);
  if (tag === 0) return identifier;
  const out = Buffer.allocUnsafe(1 + DIGEST_LENGTH);
  out[0] = tag;
  out.write(identifier.slice(identifier.length - 64), 1, 'hex');
  return out;
}

/** The stored form as hex when it is a digest (for `unhex` over a JSON array), or null when it is the text. */
export function storedDigestHex(identifier: string): string | null {
  const tag = hexDigestTag(identifier);
  return tag === 0 ? null : `0${tag}${identifier.slice(identifier.length - 64)}`;
}

/** The identifier a stored value holds. */
export function identifierOfStored(stored: StoredIdentifier): string {
  if (typeof stored === 'string') return stored;
  return DIGEST_PREFIXES[stored[0]!]! + stored.toString('hex', 1);
}

/**
 * A stored identity key: the seq of `ik_<seq>`, or the text of a key of another form. Written as a
 * bigint, which better-sqlite3 binds as an INTEGER (a number it binds as a REAL, which a column
 * without affinity would keep as one: 8 bytes); read back as a number.
 */
export type StoredIdentityKey = number | bigint | string;

/**
 * The stored form of an identity key. Throws for a key that begins with `ik_` without being
 * `ik_<seq>` (no leading zero, a safe integer): it could not be told apart from the seq's form.
 */
export function storedIdentityKey(identityKey: string): bigint | string {
  if (!identityKey.startsWith('ik_')) return identityKey;
  const seq = identityKeySeq(identityKey);
  if (seq < 0) throw new Error(`identity key of an unknown form (${identityKey.length} characters)`);
  return BigInt(seq);
}

/** The identity key a stored value holds. */
export const identityKeyOfStored = (stored: StoredIdentityKey): string => (typeof stored === 'string' ? stored : identityKeyFor(Number(stored)));

/** Whether the file's links are of the earlier text form (declared type of `identity_key`). */
function textForm(db: Database.Database): boolean {
  const type = db.prepare("SELECT type FROM pragma_table_info('identity_identifiers') WHERE name = 'identity_key'").pluck().get() as string | undefined;
  return type !== undefined && type !== '';
}

/**
 * Brings the file's links to the compact form if they are of the earlier text form (see the note on
 * top), then makes sure the table and its index exist. Safe against a concurrent opener: the check is
 * repeated under the write lock. Returns the number of links rewritten (0: nothing to do).
 */
export function migrateIdentifierLinks(db: Database.Database): number {
  let rewritten = 0;
  if (textForm(db)) {
    // Another opener may be rewriting this file: wait for it as long as a large view takes, then
    // find the work done. (`serve` opens every view file before it listens or starts its consumer,
    // storage/sqlite-storage.ts prepareFiles, so on `npm start` nothing waits here on a busy loop.)
    const busyTimeoutMs = db.pragma('busy_timeout', { simple: true }) as number;
    db.pragma(`busy_timeout = ${MIGRATION_WAIT_MS}`);
    try {
      rewritten = rewriteLinks(db);
    } finally {
      db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    }
  }
  db.exec(IDENTIFIER_LINKS_SCHEMA);
  return rewritten;
}

/** How long an opener waits for another one's migration (~5 s per million links on the benchmark machine). */
const MIGRATION_WAIT_MS = 10 * 60_000;

/** The rewrite itself, in one IMMEDIATE transaction; 0 when another connection did it meanwhile. */
function rewriteLinks(db: Database.Database): number {
  db.function('ecapi_stored_identifier', { deterministic: true }, (identifier) => storedIdentifier(identifier as string));
  db.function('ecapi_stored_identity_key', { deterministic: true }, (identityKey) => storedIdentityKey(identityKey as string));
  return db
    .transaction((): number => {
      if (!textForm(db)) return 0; // another connection migrated it while this one waited for the lock
      db.exec(LINKS_TABLE('identity_identifiers_compact'));
      // In the old key's order, which within an identifier kind is the new one's: the new B-tree fills in runs.
      const { changes } = db
        .prepare(
          `INSERT INTO identity_identifiers_compact (data_set_id, identifier, identity_key)
           SELECT data_set_id, ecapi_stored_identifier(identifier), ecapi_stored_identity_key(identity_key) FROM identity_identifiers ORDER BY data_set_id, identifier`,
        )
        .run();
      db.exec('DROP TABLE identity_identifiers'); // and its index
      db.exec('ALTER TABLE identity_identifiers_compact RENAME TO identity_identifiers');
      db.exec(IDENTIFIER_LINKS_SCHEMA);
      return changes;
    })
    .immediate();
}
