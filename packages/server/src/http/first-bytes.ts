/**
 * What a connection to the public port starts with, judged from its first bytes (pure; the socket
 * side is connection-front.ts):
 * - `tls`: a TLS record (content type 0x16, handshake): the ClientHello, handed to the TLS server;
 * - `proxy`: a PROXY protocol header, v1 ("PROXY ") or v2 (its 12-byte signature): proxy-protocol.ts;
 * - `http`: a plain-HTTP request line (an upper-case method token and a space, as "GET " or
 *   "POST "): someone used http:// on the HTTPS port; answered with a readable 400 (as nginx does)
 *   instead of a failed handshake ("Empty reply from server");
 * - `other`: anything else, handed to the TLS server, whose handshake fails as it always did;
 * - `incomplete`: too few bytes to tell (at most METHOD_MAX + 1 are ever needed).
 */
import { PROXY_V1_PREFIX, PROXY_V2_SIGNATURE, startsLike } from './proxy-protocol.js';

export type FirstBytes = 'tls' | 'proxy' | 'http' | 'other' | 'incomplete';

/** TLS record content type "handshake": the first byte of every ClientHello. */
const TLS_HANDSHAKE = 0x16;
/** The longest method token looked for (the registered methods are at most 17 characters). */
export const METHOD_MAX = 20;
const A = 0x41;
const Z = 0x5a;

export function classifyFirstBytes(data: Uint8Array): FirstBytes {
  if (data.length === 0) return 'incomplete';
  if (data[0] === TLS_HANDSHAKE) return 'tls';
  const v2 = startsLike(data, PROXY_V2_SIGNATURE);
  if (v2 === 'whole') return 'proxy';
  if (v2 === 'prefix') return 'incomplete';
  const v1 = startsLike(data, PROXY_V1_PREFIX);
  if (v1 === 'whole') return 'proxy';
  // "P", "PR", … could still be "PROXY " or "POST ", "PUT ", "PATCH ": read on.
  if (v1 === 'prefix') return 'incomplete';
  const n = Math.min(data.length, METHOD_MAX + 1);
  for (let i = 0; i < n; i++) {
    const byte = data[i]!;
    if (byte === 0x20) return i > 0 ? 'http' : 'other';
    if (byte < A || byte > Z) return 'other';
  }
  return data.length > METHOD_MAX ? 'other' : 'incomplete';
}
