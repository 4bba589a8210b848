/**
 * CPU time per call of the request path's Accept check (http/media-types.ts acceptsJson) and of
 * the `ip: truncate` policy's truncateIp (privacy/ip.ts), over the header values and addresses
 * senders send. CPU time (process.cpuUsage: user+system), not wall time, so that a shared
 * machine skews it less. Each figure is the median of 7 rounds of 200,000 calls per input.
 *
 *   node packages/server/dist/bench/header-and-ip-parsing.js [media-types.js] [ip.js]
 *
 * The optional arguments load other builds of the two modules (an A/B against another commit:
 * compile its src/http/media-types.ts and src/privacy/ip.ts and pass the .js files).
 */
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';

const ACCEPT = [undefined, 'application/json', '*/*', 'application/json, text/plain, */*', 'application/json; charset=utf-8', 'text/html, application/*;q=0.1'];
const IPS = ['203.0.113.77', '2001:db8:abcd:12:1:2:3:4', '2a02:8070:a1c2:f00::1', '::ffff:192.0.2.1', 'fe80::1%eth0'];
const ROUNDS = 7;
const CALLS = 200_000;

function nsPerCall<T>(fn: (input: T) => unknown, input: T): number {
  const rounds: number[] = [];
  let sink = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const start = process.cpuUsage();
    for (let i = 0; i < CALLS; i++) if (fn(input)) sink++;
    const used = process.cpuUsage(start);
    rounds.push(((used.user + used.system) * 1000) / CALLS);
  }
  if (sink < 0) console.log(sink);
  return rounds.sort((a, b) => a - b)[ROUNDS >> 1]!;
}

async function load<T>(argument: string | undefined, fallback: string): Promise<T> {
  return (await import(argument ? pathToFileURL(resolve(argument)).href : fallback)) as T;
}

const media = await load<{ acceptsJson(header: string | undefined): boolean }>(process.argv[2], '../src/http/media-types.js');
const ip = await load<{ truncateIp(ip: string): string }>(process.argv[3], '../src/privacy/ip.js');
const out: Record<string, Record<string, number>> = { acceptsJson_ns: {}, truncateIp_ns: {} };
for (const header of ACCEPT) out.acceptsJson_ns![String(header)] = Math.round(nsPerCall(media.acceptsJson, header) * 10) / 10;
for (const address of IPS) out.truncateIp_ns![address] = Math.round(nsPerCall(ip.truncateIp, address) * 10) / 10;
console.log(JSON.stringify({ node: process.version, date: new Date().toISOString(), ...out }));
