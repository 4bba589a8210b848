/**
 * Digests that stand for an identifier (or an event id) in the suppression list and the deletion
 * audit log: HMAC-SHA256 under a random key of the lifecycle store, over the data set and a value.
 * Equal values of one data set give equal digests, so a later event can be matched; the digest is
 * useless without the key, so a dictionary of phone hashes or IP addresses cannot be run against an
 * exported audit log.
 *
 * Which value: an identifier is digested in its canonical form (canonicalIdentifier), so that the
 * suppression list matches an identifier whichever field carries it and however it is spelled:
 * - a SHA-256 hex digest is `sha256:<64 lowercase hex>` whether it came as `email_address`,
 *   `phone_numbers`, `customer_identifier` or `uids[].id` (a suppressed email hash sent as a
 *   customer identifier is still the same person's hash);
 * - a UUID (device ids: `ifa`, or a UUID in any other identifier field) is `uuid:<lowercase,
 *   hyphenated 8-4-4-4-12>` whether it was written with or without hyphens, in braces, as
 *   `urn:uuid:…`, in upper or lower case;
 * - anything else keeps its typed form (`uid:<id>`, `ifa:<id>` …, merged-view/identity.ts).
 * The prefixes `sha256:` and `uuid:` are no identifier type, so a canonical value never equals a
 * typed one. An event id (`events delete`) is digested as it is: it is no identifier.
 */
import { createHmac } from 'node:crypto';
import type { DeletionKind } from './lifecycle-backend.js';

export function identifierDigest(key: Buffer, dataSetId: string, value: string): string {
  return createHmac('sha256', key).update(dataSetId).update('\u0000').update(value).digest('hex');
}

const TYPES = new Set(['email', 'phone', 'cid', 'uid', 'ifa']);
const HEX64 = /^[0-9a-f]{64}$/;
const HEX32 = /^[0-9a-f]{32}$/;
const HYPHENATED = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The UUID in canonical form (lowercase, hyphenated), or null when `text` is no UUID. */
export function canonicalUuid(text: string): string | null {
  let v = text.trim().toLowerCase();
  if (v.startsWith('urn:uuid:')) v = v.slice('urn:uuid:'.length);
  if (v.startsWith('{') && v.endsWith('}')) v = v.slice(1, -1);
  if (HYPHENATED.test(v)) return v;
  if (HEX32.test(v)) return `${v.slice(0, 8)}-${v.slice(8, 12)}-${v.slice(12, 16)}-${v.slice(16, 20)}-${v.slice(20)}`;
  return null;
}

/** The form a typed identifier (`email:<hash>`, `ifa:<id>` …) is compared in (see the note above). */
export function canonicalIdentifier(identifier: string): string {
  const colon = identifier.indexOf(':');
  if (colon < 0 || !TYPES.has(identifier.slice(0, colon))) return identifier;
  const value = identifier.slice(colon + 1).trim().toLowerCase();
  if (HEX64.test(value)) return `sha256:${value}`;
  const uuid = canonicalUuid(value);
  return uuid === null ? identifier : `uuid:${uuid}`;
}

/** Digest of a typed identifier, in its canonical form: what the suppression list holds and matches. */
export function suppressionDigest(key: Buffer, dataSetId: string, identifier: string): string {
  return identifierDigest(key, dataSetId, canonicalIdentifier(identifier));
}

/**
 * The digest noting that an event id's record was deleted (lifecycle stores' deleted_events): the
 * identifier digest of the id, cut to 128 bits (a collision among a data set's deleted ids is out of
 * reach; the table stays small: a forget can delete many records).
 */
export function eventDigest(key: Buffer, dataSetId: string, eventId: string): string {
  return identifierDigest(key, dataSetId, eventId).slice(0, 32);
}

/** A deletion request's target digest (the audit log): an identifier canonical, an event id or identity key as it is. */
export function targetDigest(key: Buffer, dataSetId: string, kind: DeletionKind, target: string): string {
  return kind === 'forget_identifier' ? suppressionDigest(key, dataSetId, target) : identifierDigest(key, dataSetId, target);
}
