/**
 * Request signing: X-Service-Signature is the lowercase hex HMAC-SHA256 of the exact raw body bytes,
 * keyed by the UTF-8 bytes of the shared secret string exactly as it was issued.
 *
 * Hazard: sign the bytes you send. Re-serializing JSON after signing (pretty-printing, key
 * re-ordering, a proxy that rewrites bodies) changes the bytes and the signature no longer verifies.
 */
import { createHmac } from 'node:crypto';

export const SIGNATURE_PATTERN = /^[0-9a-f]{64}$/;

/** Lowercase hex HMAC-SHA256 of `body` (a string is signed as its UTF-8 bytes). */
export function signBody(body: string | Uint8Array, secret: string): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}
