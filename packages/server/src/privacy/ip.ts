/**
 * IP truncation for the `ip: truncate` policy: IPv4 to its /24 (last octet zeroed), IPv6 to its
 * /48 (last five groups zeroed), printed in RFC 5952 canonical form. An IPv4-mapped IPv6
 * address (::ffff:a.b.c.d) is truncated as the IPv4 address it carries (::ffff:a.b.c.0), since a
 * /48 of it would erase it entirely. Inputs have already passed validation (node:net isIP).
 */
import { isIPv4 } from 'node:net';

export function truncateIp(ip: string): string {
  if (isIPv4(ip)) return truncateIpv4(ip);
  const groups = parseIpv6(ip);
  if (groups === undefined) return ip; // unreachable for validated input; leave untouched
  const mapped = groups[0] === 0 && groups[1] === 0 && groups[2] === 0 && groups[3] === 0 && groups[4] === 0 && groups[5] === 0xffff;
  if (mapped) {
    return `::ffff:${groups[6]! >> 8}.${groups[6]! & 0xff}.${groups[7]! >> 8}.0`;
  }
  return formatIpv6([groups[0]!, groups[1]!, groups[2]!, 0, 0, 0, 0, 0]);
}

function truncateIpv4(ip: string): string {
  return `${ip.slice(0, ip.lastIndexOf('.'))}.0`;
}

/** Eight 16-bit groups, or undefined when not parseable. Accepts `::` and a dotted IPv4 tail. */
export function parseIpv6(input: string): number[] | undefined {
  let ip = input;
  const zone = ip.indexOf('%');
  if (zone >= 0) ip = ip.slice(0, zone);
  const lastColon = ip.lastIndexOf(':');
  if (ip.indexOf('.', lastColon) >= 0) {
    // dotted IPv4 tail: rewrite it as two hex groups
    const v4 = ip.slice(lastColon + 1);
    if (!isIPv4(v4)) return undefined;
    const o = v4.split('.').map(Number);
    ip = `${ip.slice(0, lastColon + 1)}${((o[0]! << 8) | o[1]!).toString(16)}:${((o[2]! << 8) | o[3]!).toString(16)}`;
  }
  const doubleColon = ip.indexOf('::');
  const parseList = (s: string): number[] | undefined => {
    if (s === '') return [];
    const out: number[] = [];
    for (const part of s.split(':')) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(part)) return undefined;
      out.push(parseInt(part, 16));
    }
    return out;
  };
  let groups: number[] | undefined;
  if (doubleColon >= 0) {
    const head = parseList(ip.slice(0, doubleColon));
    const rest = parseList(ip.slice(doubleColon + 2));
    if (head === undefined || rest === undefined) return undefined;
    const missing = 8 - head.length - rest.length;
    if (missing < 1) return undefined;
    groups = [...head, ...new Array<number>(missing).fill(0), ...rest];
  } else {
    const all = parseList(ip);
    if (all === undefined) return undefined;
    groups = all;
  }
  return groups.length === 8 ? groups : undefined;
}

/** RFC 5952: lowercase, no leading zeros, the longest run (>= 2) of zero groups as `::`. */
export function formatIpv6(groups: readonly number[]): string {
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLength).join(':')}`;
}
