/**
 * The PROXY protocol header (HAProxy's proxy-protocol.txt, versions 1 and 2), as a pure parser: an
 * L4 balancer (HAProxy `send-proxy`/`send-proxy-v2`, nginx `proxy_protocol on`, Envoy's
 * proxy_protocol upstream transport, AWS NLB, …) writes it at the start of the TCP connection,
 * before the client's TLS ClientHello, to say which client the connection is for.
 *
 * parseProxyHeader(bytes) looks at the first bytes received and says: not complete yet, invalid,
 * or a header of `length` bytes naming the client's address and port (null when the header says
 * to use the connection's own endpoints: v2 LOCAL, e.g. a balancer's health check; v1 UNKNOWN; v2
 * UNSPEC or UNIX families). It never reads past the header: what follows (the TLS bytes) is the
 * caller's, to hand on untouched.
 *
 * Hazards: the bytes come from the network. Every length is checked before it is used, a v2 header
 * longer than `maxBytes` is invalid (the caller must never buffer more than that waiting for one),
 * a v1 line is at most 107 bytes (the spec's bound), addresses must be well-formed IPv4/IPv6 of the
 * family announced, ports decimal 0–65535. Nothing here trusts the sender: whether a header is
 * accepted at all (only from trusted proxies) is connection-front.ts's decision.
 *
 * Written here rather than taken from npm: the parsers there parse a whole buffer as one string
 * (copying the TLS bytes that follow), do not say "incomplete" (a stream needs that), and accept
 * unchecked address text; the format is small and fully specified.
 */
import { isIPv4, isIPv6 } from 'node:net';

/** The v2 signature: \r\n\r\n\0\r\nQUIT\n. */
export const PROXY_V2_SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);
/** The v1 prefix. */
export const PROXY_V1_PREFIX = Buffer.from('PROXY ', 'latin1');
/** The longest v1 header, CRLF included (the spec's figure). */
export const PROXY_V1_MAX_BYTES = 107;
/** The longest v2 header accepted by default (16-byte head + addresses + TLVs). */
export const DEFAULT_PROXY_V2_MAX_BYTES = 4096;

export interface ProxySource {
  readonly address: string;
  readonly port: number;
}

export type ProxyHeaderParse =
  | { readonly kind: 'incomplete' }
  | { readonly kind: 'invalid'; readonly reason: string }
  | {
    readonly kind: 'header';
    readonly version: 1 | 2;
    /** Bytes of the header: the connection's own data starts there. */
    readonly length: number;
    /** The client, or null: use the connection's own peer address. */
    readonly source: ProxySource | null;
  };

const INCOMPLETE: ProxyHeaderParse = Object.freeze({ kind: 'incomplete' });
const invalid = (reason: string): ProxyHeaderParse => ({ kind: 'invalid', reason });

/** Whether `data` (all of it) is a prefix of `signature`, or starts with the whole of it. */
export function startsLike(data: Uint8Array, signature: Uint8Array): 'no' | 'prefix' | 'whole' {
  const n = Math.min(data.length, signature.length);
  for (let i = 0; i < n; i++) if (data[i] !== signature[i]) return 'no';
  return data.length >= signature.length ? 'whole' : 'prefix';
}

const PORT = /^(0|[1-9][0-9]{0,4})$/;
const portOf = (text: string): number | null => (PORT.test(text) && Number(text) <= 65535 ? Number(text) : null);

function parseV1(data: Buffer): ProxyHeaderParse {
  // The line ends at the first CRLF, within 107 bytes.
  const limit = Math.min(data.length, PROXY_V1_MAX_BYTES);
  let end = -1;
  for (let i = PROXY_V1_PREFIX.length; i < limit - 1; i++) {
    if (data[i] === 0x0d && data[i + 1] === 0x0a) {
      end = i;
      break;
    }
  }
  if (end < 0) return data.length >= PROXY_V1_MAX_BYTES ? invalid('v1 header without CRLF within 107 bytes') : INCOMPLETE;
  const line = data.toString('latin1', PROXY_V1_PREFIX.length, end);
  const length = end + 2;
  // "UNKNOWN" may be followed by anything up to the CRLF; the receiver uses the real endpoints.
  if (line === 'UNKNOWN' || line.startsWith('UNKNOWN ')) return { kind: 'header', version: 1, length, source: null };
  const parts = line.split(' ');
  if (parts.length !== 5) return invalid('v1 header: expected "TCP4|TCP6 src dst srcport dstport"');
  const [family, source, destination, sourcePort, destinationPort] = parts as [string, string, string, string, string];
  const isFamily = family === 'TCP4' ? isIPv4 : family === 'TCP6' ? isIPv6 : null;
  if (isFamily === null) return invalid('v1 header: unknown protocol family');
  if (!isFamily(source) || !isFamily(destination)) return invalid(`v1 header: addresses are not ${family === 'TCP4' ? 'IPv4' : 'IPv6'}`);
  const port = portOf(sourcePort);
  if (port === null || portOf(destinationPort) === null) return invalid('v1 header: ports must be decimal 0-65535');
  return { kind: 'header', version: 1, length, source: { address: source, port } };
}

function ipv6Text(data: Buffer, at: number): string {
  // IPv4-mapped (::ffff:a.b.c.d): as node:net prints it, dotted.
  let mapped = data[at + 10] === 0xff && data[at + 11] === 0xff;
  for (let i = 0; mapped && i < 10; i++) mapped = data[at + i] === 0;
  if (mapped) return `::ffff:${data[at + 12]}.${data[at + 13]}.${data[at + 14]}.${data[at + 15]}`;
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(data.readUInt16BE(at + i).toString(16));
  // Canonical (compressed) text, as node:net prints peer addresses: let URL's host parser do it.
  return new URL(`http://[${groups.join(':')}]/`).hostname.slice(1, -1);
}

function parseV2(data: Buffer, maxBytes: number): ProxyHeaderParse {
  if (data.length < 16) return INCOMPLETE;
  const versionCommand = data[12]!;
  if (versionCommand >> 4 !== 2) return invalid('v2 header: version is not 2');
  const command = versionCommand & 0x0f;
  if (command > 1) return invalid('v2 header: unknown command');
  const familyTransport = data[13]!;
  const length = 16 + data.readUInt16BE(14);
  if (length > maxBytes) return invalid(`v2 header longer than ${maxBytes} bytes`);
  if (data.length < length) return INCOMPLETE;
  // LOCAL: the proxy's own connection (health checks): the addresses, if any, are to be ignored.
  if (command === 0) return { kind: 'header', version: 2, length, source: null };
  const family = familyTransport >> 4;
  const transport = familyTransport & 0x0f;
  if (family > 3 || transport > 2) return invalid('v2 header: unknown address family or transport');
  // UNSPEC and UNIX: no IP address to take; the connection's own endpoints stand.
  if (family === 0 || family === 3) {
    if (family === 3 && length - 16 < 216) return invalid('v2 header: address block too short for its family');
    return { kind: 'header', version: 2, length, source: null };
  }
  if (transport !== 1) return invalid('v2 header: only STREAM (TCP) connections are proxied here');
  if (family === 1) {
    if (length - 16 < 12) return invalid('v2 header: address block too short for its family');
    const address = `${data[16]}.${data[17]}.${data[18]}.${data[19]}`;
    return { kind: 'header', version: 2, length, source: { address, port: data.readUInt16BE(24) } };
  }
  if (length - 16 < 36) return invalid('v2 header: address block too short for its family');
  return { kind: 'header', version: 2, length, source: { address: ipv6Text(data, 16), port: data.readUInt16BE(48) } };
}

/**
 * Parses a PROXY header at the start of `data`. `data` must start with a v1 prefix or v2 signature
 * (or a prefix of one: then it is incomplete); anything else is invalid.
 */
export function parseProxyHeader(data: Buffer, maxBytes = DEFAULT_PROXY_V2_MAX_BYTES): ProxyHeaderParse {
  const v2 = startsLike(data, PROXY_V2_SIGNATURE);
  if (v2 === 'whole') return parseV2(data, maxBytes);
  const v1 = startsLike(data, PROXY_V1_PREFIX);
  if (v1 === 'whole') return parseV1(data);
  if (v1 === 'prefix' || v2 === 'prefix') return INCOMPLETE;
  return invalid('not a PROXY protocol header');
}
