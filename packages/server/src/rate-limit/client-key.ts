/**
 * The key under which failed-authentication throttles count a client address (the public port's
 * pre-auth shedding, http/public-server.ts, and the admin port's throttle, admin/admin-guard.ts):
 * IPv4 as is (also IPv4-mapped IPv6), IPv6 by its /64.
 *
 * Why /64: one IPv6 host (or one customer) is normally handed a whole /64 and can pick any of its
 * 2^64 source addresses freely; keyed per /128, every new source address would get a fresh burst
 * of failures (unthrottled signature guessing). A /64 is the smallest prefix a host cannot leave.
 *
 * Hot path: called once per public request; an IPv4 address (no ':') is returned without any work.
 */
import { isIP } from 'node:net';

/** The throttle's key of a client address: IPv4 (also v4-mapped) as is, IPv6 by its /64, `unknown` when there is none. */
export function clientKeyOf(address: string | undefined): string {
  if (!address) return 'unknown';
  if (address.indexOf(':') === -1) return address;
  const v4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (v4) return v4[1]!;
  if (isIP(address) !== 6) return address;
  const [head = '', tail = ''] = address.toLowerCase().split('%')[0]!.split('::') as [string?, string?];
  const left = head === '' ? [] : head.split(':');
  const right = address.includes('::') ? (tail === '' ? [] : tail.split(':')) : [];
  const groups = [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return `${groups.slice(0, 4).map((g) => g.replace(/^0+(?=.)/, '')).join(':')}::/64`;
}
