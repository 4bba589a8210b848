/**
 * `serve --proxy-protocol <CIDRs>`: the peers (L4 balancers) whose PROXY protocol headers are
 * believed (connection-front.ts). Parsed once at start-up into node:net's BlockList; a bad entry
 * stops `serve` with one line. Light on purpose: the CLI imports it to check the option.
 */
import { BlockList, isIPv4, isIPv6 } from 'node:net';

/** `a.b.c.d`, `a.b.c.d/n`, `v6`, `v6/n`, comma-separated → a BlockList; throws on a bad entry. */
export function parseTrustedProxies(text: string): BlockList {
  const list = new BlockList();
  const entries = text.split(',').map((entry) => entry.trim()).filter((entry) => entry !== '');
  if (entries.length === 0) throw new Error('--proxy-protocol needs the trusted proxies\' addresses or CIDRs, e.g. 10.0.0.0/8');
  for (const entry of entries) {
    const slash = entry.indexOf('/');
    const address = slash < 0 ? entry : entry.slice(0, slash);
    const type = isIPv4(address) ? 'ipv4' : isIPv6(address) ? 'ipv6' : null;
    const prefixText = slash < 0 ? (type === 'ipv4' ? '32' : '128') : entry.slice(slash + 1);
    const prefix = /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : NaN;
    if (type === null || !(prefix >= 0 && prefix <= (type === 'ipv4' ? 32 : 128))) {
      throw new Error(`invalid --proxy-protocol entry "${entry}": use an IPv4 or IPv6 address or CIDR (10.0.0.0/8, fd00::/8)`);
    }
    list.addSubnet(address, prefix, type);
  }
  return list;
}

/** Whether a peer address (as node:net reports it, v4-mapped included) is in the list. */
export function isTrustedPeer(list: BlockList, address: string | undefined): boolean {
  if (!address) return false;
  const v4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (v4) return list.check(v4[1]!, 'ipv4');
  return isIPv6(address) ? list.check(address, 'ipv6') : isIPv4(address) && list.check(address, 'ipv4');
}
