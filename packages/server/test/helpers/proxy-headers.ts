/**
 * PROXY protocol headers as balancers write them (HAProxy send-proxy / send-proxy-v2), built by
 * hand from the spec for tests, independently of the parser under test.
 */
const PROXY_V2_SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);

/** A v1 header for a TCP4 client. */
export const v1Header = (client: string, port = 40000): Buffer => Buffer.from(`PROXY TCP4 ${client} 127.0.0.1 ${port} 8443\r\n`);

/** A v2 header as HAProxy's send-proxy-v2 writes it (PROXY command, STREAM), with optional TLVs. */
export function v2Header(family: 'inet' | 'inet6' | 'local' | 'unix' | 'unspec', source = '', port = 0, tlvs = Buffer.alloc(0)): Buffer {
  let command = 0x21;
  let familyByte = 0x11;
  let addresses: Buffer;
  if (family === 'inet') {
    addresses = Buffer.alloc(12);
    source.split('.').forEach((part, i) => (addresses[i] = Number(part)));
    Buffer.from([10, 0, 0, 1]).copy(addresses, 4);
    addresses.writeUInt16BE(port, 8);
    addresses.writeUInt16BE(8443, 10);
  } else if (family === 'inet6') {
    familyByte = 0x21;
    addresses = Buffer.alloc(36);
    const groups = expandV6(source);
    groups.forEach((g, i) => addresses.writeUInt16BE(g, i * 2));
    addresses[31] = 1;
    addresses.writeUInt16BE(port, 32);
    addresses.writeUInt16BE(8443, 34);
  } else if (family === 'unix') {
    familyByte = 0x31;
    addresses = Buffer.alloc(216);
  } else {
    command = family === 'local' ? 0x20 : 0x21;
    familyByte = 0x00;
    addresses = Buffer.alloc(0);
  }
  const head = Buffer.alloc(16);
  PROXY_V2_SIGNATURE.copy(head);
  head[12] = command;
  head[13] = familyByte;
  head.writeUInt16BE(addresses.length + tlvs.length, 14);
  return Buffer.concat([head, addresses, tlvs]);
}

function expandV6(address: string): number[] {
  const [left = '', right = ''] = address.split('::');
  const l = left === '' ? [] : left.split(':');
  const r = address.includes('::') ? (right === '' ? [] : right.split(':')) : [];
  return [...l, ...Array<string>(8 - l.length - r.length).fill('0'), ...r].map((g) => parseInt(g, 16));
}
