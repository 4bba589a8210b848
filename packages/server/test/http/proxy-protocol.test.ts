/**
 * The PROXY protocol parser (v1 and v2, http/proxy-protocol.ts) and the first-bytes classifier
 * (http/first-bytes.ts), as pure functions: the headers HAProxy, nginx and Envoy send, every way
 * one can be cut short, and fuzzed input (never a throw, never a length past the input, never an
 * address that is not an IP of the announced family). Over a real socket: proxy-protocol-live.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isIP } from 'node:net';
import fc from 'fast-check';
import { parseProxyHeader, PROXY_V2_SIGNATURE } from '../../src/http/proxy-protocol.js';
import { v2Header } from '../helpers/proxy-headers.js';
import { classifyFirstBytes } from '../../src/http/first-bytes.js';

const CLIENT_HELLO_START = Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01]);

test('v1: TCP4 and TCP6 headers give the client address and port, and the exact header length', () => {
  const v4 = Buffer.from('PROXY TCP4 203.0.113.7 10.0.0.1 51234 8443\r\n');
  assert.deepEqual(parseProxyHeader(Buffer.concat([v4, CLIENT_HELLO_START])), {
    kind: 'header', version: 1, length: v4.length, source: { address: '203.0.113.7', port: 51234 },
  });
  const v6 = Buffer.from('PROXY TCP6 2001:db8::7 2001:db8::1 65535 443\r\n');
  assert.deepEqual(parseProxyHeader(v6), { kind: 'header', version: 1, length: v6.length, source: { address: '2001:db8::7', port: 65535 } });
  const unknown = Buffer.from('PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n');
  assert.deepEqual(parseProxyHeader(unknown), { kind: 'header', version: 1, length: unknown.length, source: null });
  assert.deepEqual(parseProxyHeader(Buffer.from('PROXY UNKNOWN\r\n')), { kind: 'header', version: 1, length: 15, source: null });
});

test('v1: every cut of a header is incomplete, never invalid', () => {
  const header = Buffer.from('PROXY TCP4 203.0.113.7 10.0.0.1 51234 8443\r\n');
  for (let n = 0; n < header.length; n++) {
    assert.deepEqual(parseProxyHeader(header.subarray(0, n)), { kind: 'incomplete' }, `first ${n} bytes`);
  }
});

test('v1: malformed headers are invalid', () => {
  for (const line of [
    'PROXY TCP4 203.0.113.7 10.0.0.1 51234\r\n', // a field missing
    'PROXY TCP4 2001:db8::7 10.0.0.1 1 2\r\n', // wrong family
    'PROXY TCP6 203.0.113.7 2001:db8::1 1 2\r\n',
    'PROXY TCP4 203.0.113.999 10.0.0.1 1 2\r\n',
    'PROXY TCP4 203.0.113.7 10.0.0.1 65536 2\r\n', // port out of range
    'PROXY TCP4 203.0.113.7 10.0.0.1 01 2\r\n', // leading zero
    'PROXY TCP4 203.0.113.7  10.0.0.1 1 2\r\n', // two spaces
    'PROXY UDP4 203.0.113.7 10.0.0.1 1 2\r\n',
    'PROXY TCP4 203.0.113.7 10.0.0.1 -1 2\r\n',
  ]) {
    assert.equal(parseProxyHeader(Buffer.from(line)).kind, 'invalid', JSON.stringify(line));
  }
  // No CRLF within the spec's 107 bytes.
  assert.equal(parseProxyHeader(Buffer.from(`PROXY TCP4 ${'1'.repeat(120)}`)).kind, 'invalid');
});

test('v2: IPv4, IPv6 (v4-mapped too), TLVs skipped, LOCAL / UNSPEC / UNIX use the connection\'s own address', () => {
  const tlv = Buffer.from([0x04, 0x00, 0x03, 0x61, 0x62, 0x63]); // PP2_TYPE_NOOP-like TLV, 3 bytes
  const v4 = v2Header('inet', '203.0.113.7', 51234, tlv);
  assert.deepEqual(parseProxyHeader(Buffer.concat([v4, CLIENT_HELLO_START])), {
    kind: 'header', version: 2, length: 16 + 12 + 6, source: { address: '203.0.113.7', port: 51234 },
  });
  assert.deepEqual(parseProxyHeader(v2Header('inet6', '2001:db8:0:0:0:0:0:7', 443)), {
    kind: 'header', version: 2, length: 16 + 36, source: { address: '2001:db8::7', port: 443 },
  });
  assert.deepEqual(parseProxyHeader(v2Header('inet6', '0:0:0:0:0:ffff:cb00:7107', 1)), {
    kind: 'header', version: 2, length: 16 + 36, source: { address: '::ffff:203.0.113.7', port: 1 },
  });
  for (const family of ['local', 'unspec', 'unix'] as const) {
    const parsed = parseProxyHeader(v2Header(family));
    assert.equal(parsed.kind, 'header', family);
    assert.equal((parsed as { source: unknown }).source, null, family);
  }
});

test('v2: every cut is incomplete; bad version, command, family, short blocks and oversize headers are invalid', () => {
  const header = v2Header('inet', '203.0.113.7', 51234);
  for (let n = 0; n < header.length; n++) assert.equal(parseProxyHeader(header.subarray(0, n)).kind, 'incomplete', `first ${n} bytes`);
  const mutate = (at: number, value: number) => {
    const copy = Buffer.from(header);
    copy[at] = value;
    return copy;
  };
  assert.equal(parseProxyHeader(mutate(12, 0x11)).kind, 'invalid', 'version 1 in a v2 header');
  assert.equal(parseProxyHeader(mutate(12, 0x22)).kind, 'invalid', 'unknown command');
  assert.equal(parseProxyHeader(mutate(13, 0x41)).kind, 'invalid', 'unknown family');
  assert.equal(parseProxyHeader(mutate(13, 0x12)).kind, 'invalid', 'DGRAM over TCP');
  const short = Buffer.from(header.subarray(0, 16 + 8));
  short.writeUInt16BE(8, 14);
  assert.equal(parseProxyHeader(short).kind, 'invalid', 'address block shorter than IPv4 needs');
  const long = Buffer.from(header);
  long.writeUInt16BE(5000, 14);
  assert.equal(parseProxyHeader(long).kind, 'invalid', 'longer than the 4096-byte bound: never buffered');
  assert.equal(parseProxyHeader(Buffer.from('GET / HTTP/1.1\r\n')).kind, 'invalid');
});

test('fuzz: arbitrary bytes after a signature never throw, and a header never claims more than was given', () => {
  const prefixes = [Buffer.alloc(0), Buffer.from('PROXY '), Buffer.from('PROXY TCP4 '), PROXY_V2_SIGNATURE, Buffer.concat([PROXY_V2_SIGNATURE, Buffer.from([0x21, 0x11])])];
  fc.assert(
    fc.property(fc.constantFrom(...prefixes), fc.uint8Array({ maxLength: 300 }), (prefix, tail) => {
      const data = Buffer.concat([prefix, tail]);
      const parsed = parseProxyHeader(data);
      if (parsed.kind !== 'header') return;
      assert.ok(parsed.length > 0 && parsed.length <= data.length);
      if (parsed.source !== null) {
        assert.ok(isIP(parsed.source.address) !== 0, parsed.source.address);
        assert.ok(Number.isInteger(parsed.source.port) && parsed.source.port >= 0 && parsed.source.port <= 65535);
      }
    }),
    { numRuns: 5000 },
  );
});

test('fuzz: valid v1 and v2 headers round-trip whatever follows them, and any cut is incomplete', () => {
  const ipv4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((p) => p.join('.'));
  fc.assert(
    fc.property(ipv4, fc.nat(65535), fc.boolean(), fc.uint8Array({ maxLength: 64 }), fc.nat(), (address, port, v1, rest, cutSeed) => {
      const header = v1 ? Buffer.from(`PROXY TCP4 ${address} 10.0.0.1 ${port} 8443\r\n`) : v2Header('inet', address, port);
      const parsed = parseProxyHeader(Buffer.concat([header, rest]));
      assert.deepEqual(parsed, { kind: 'header', version: v1 ? 1 : 2, length: header.length, source: { address, port } });
      assert.equal(parseProxyHeader(header.subarray(0, cutSeed % header.length)).kind, 'incomplete');
    }),
    { numRuns: 2000 },
  );
});

test('first bytes: TLS, PROXY, plain HTTP, other, and undecided prefixes', () => {
  assert.equal(classifyFirstBytes(CLIENT_HELLO_START), 'tls');
  assert.equal(classifyFirstBytes(Buffer.from([0x16])), 'tls');
  assert.equal(classifyFirstBytes(Buffer.from('PROXY TCP4 ')), 'proxy');
  assert.equal(classifyFirstBytes(PROXY_V2_SIGNATURE), 'proxy');
  for (const request of ['GET / HTTP/1.1\r\n', 'POST /v1/events HTTP/1.1\r\n', 'PUT /', 'PATCH /', 'OPTIONS *', 'PRI * HTTP/2.0']) {
    assert.equal(classifyFirstBytes(Buffer.from(request)), 'http', request);
  }
  for (const prefix of ['', 'P', 'PRO', 'PROXY', 'G', 'GE', 'GET', 'POS']) assert.equal(classifyFirstBytes(Buffer.from(prefix)), 'incomplete', prefix);
  assert.equal(classifyFirstBytes(PROXY_V2_SIGNATURE.subarray(0, 5)), 'incomplete');
  for (const other of [' GET', 'get /', 'SSH-2.0-OpenSSH', '\x80\x01', 'A'.repeat(30)]) assert.equal(classifyFirstBytes(Buffer.from(other, 'latin1')), 'other', other);
  // Never undecided for long: at most 21 bytes decide.
  fc.assert(fc.property(fc.uint8Array({ minLength: 21, maxLength: 64 }), (bytes) => {
    const data = Buffer.from(bytes);
    if (data.subarray(0, 12).equals(PROXY_V2_SIGNATURE.subarray(0, Math.min(12, data.length)))) return;
    assert.notEqual(classifyFirstBytes(data), 'incomplete');
  }));
});
