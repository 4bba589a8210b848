/**
 * Steps 2, 4 and 5 of the request path: who is calling, and may they write to this data set.
 *
 * Security properties:
 * - The signature is checked for shape (64 lowercase hex) before any HMAC is computed, so the
 *   constant-time comparison always compares two 32-byte buffers (timingSafeEqual throws on
 *   unequal lengths; a malformed signature must be a 401, never a 500).
 * - During a rotation's grace period either secret verifies; afterwards the old one gets its own
 *   message, so a sender who missed the switch knows what to do.
 * - A data set that does not exist answers exactly like one the key has no grant for, so the
 *   service never reveals which data sets exist.
 * - The checks that need no body (headers, signature shape, key known and not revoked) are one
 *   function, run twice: from the request head by the public server (refusalBeforeBody), so that
 *   a request that can only fail is refused before its body costs anything, and again here.
 */
import { createHmac, timingSafeEqual, type KeyObject } from 'node:crypto';
import { HEADER_DATA_SET, HEADER_KEY_ID, HEADER_SIGNATURE, SIGNATURE_PATTERN } from '@ecapi-ingest/protocol';
import { RequestError, requestError } from '../errors.js';
import type { ActiveKey, CredentialSnapshot } from '../control/control-plane.js';

export interface Principal {
  readonly key: ActiveKey;
  readonly dataSetId: string;
}

type Headers = Record<string, string | string[] | undefined>;

function single(headers: Headers, name: string): string | undefined {
  const value = headers[name];
  // Node joins repeated custom headers with ", "; an array only occurs for set-cookie-like names.
  return Array.isArray(value) ? value.join(', ') : value;
}

function matches(key: KeyObject, body: Buffer, signature: Buffer): boolean {
  return timingSafeEqual(createHmac('sha256', key).update(body).digest(), signature);
}

export function isBearer(authorization: string | undefined): boolean {
  return authorization !== undefined && /^\s*bearer(\s|$)/i.test(authorization);
}

/**
 * The checks that need no body, in the spec's order: the three headers, the signature's shape, the
 * key known, the key not revoked. Throws the first that fails; returns the key.
 */
function keyFromHeaders(headers: Headers, snapshot: CredentialSnapshot): ActiveKey {
  const keyId = single(headers, HEADER_KEY_ID);
  if (!keyId) throw requestError('MISSING_KEY_ID');
  if (!single(headers, HEADER_DATA_SET)) throw requestError('MISSING_DATA_SET');
  const signatureHex = single(headers, HEADER_SIGNATURE);
  if (!signatureHex) throw requestError('MISSING_SIGNATURE');
  if (!SIGNATURE_PATTERN.test(signatureHex)) throw requestError('MALFORMED_SIGNATURE');
  const key = snapshot.keys.get(keyId);
  if (!key) throw requestError('UNKNOWN_KEY');
  if (key.revoked) throw requestError('REVOKED_KEY');
  return key;
}

/**
 * What authenticate() (with the Bearer check before it) would refuse without looking at the body,
 * with the same status and message: the public server asks this before it reads or budgets a body,
 * so that a request that can only fail costs no body bytes (issue 16). Everything that needs the
 * body (the HMAC) and everything the spec orders after it (Content-Type, Accept, the grant) is left
 * to handleEventsRequest, so no answer changes.
 */
export function refusalBeforeBody(headers: Headers, snapshot: CredentialSnapshot): RequestError | null {
  if (isBearer(single(headers, 'authorization'))) return requestError('BEARER_NOT_ENABLED');
  try {
    keyFromHeaders(headers, snapshot);
    return null;
  } catch (error) {
    if (error instanceof RequestError) return error;
    throw error;
  }
}

export function authenticate(headers: Headers, body: Buffer, snapshot: CredentialSnapshot, nowMs: number): Principal {
  const key = keyFromHeaders(headers, snapshot);
  const signature = Buffer.from(single(headers, HEADER_SIGNATURE)!, 'hex');
  if (!matches(key.current, body, signature)) {
    const previous = key.previous;
    if (previous === null || !matches(previous.key, body, signature)) throw requestError('SIGNATURE_MISMATCH');
    if (nowMs >= previous.validUntil) throw requestError('SECRET_EXPIRED');
  }
  return { key, dataSetId: single(headers, HEADER_DATA_SET)! };
}

/** True when the key holds a grant for a data set that exists. */
export function isAuthorized(key: ActiveKey, dataSetId: string, snapshot: CredentialSnapshot): boolean {
  return key.dataSets.has(dataSetId) && snapshot.dataSets.has(dataSetId);
}
