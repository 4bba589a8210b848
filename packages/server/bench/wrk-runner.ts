/**
 * Runs wrk (HTTP/1.1 keep-alive over TLS) against a URL with pre-generated signed requests, and
 * parses its report. wrk is a C load generator: on a 2-core machine it leaves far more CPU to the
 * server than a JavaScript generator would.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { SignedBody } from './bench-events.js';

export interface WrkResult {
  readonly requestsPerSecond: number;
  readonly non2xx: number;
  readonly totalRequests: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly errors: string;
}

export function ensureWrk(): string {
  const found = spawnSync('sh', ['-c', 'command -v wrk'], { encoding: 'utf8' }).stdout.trim();
  if (found) return found;
  if (process.getuid?.() === 0) {
    process.stderr.write('installing wrk (apt-get)...\n');
    execFileSync('sh', ['-c', 'apt-get install -y -q wrk >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q wrk >/dev/null)']);
    return spawnSync('sh', ['-c', 'command -v wrk'], { encoding: 'utf8' }).stdout.trim();
  }
  throw new Error('wrk is not installed: apt-get install wrk');
}

const luaString = (text: string) => {
  let level = 1;
  while (text.includes(`]${'='.repeat(level)}]`)) level++;
  const eq = '='.repeat(level);
  return `[${eq}[${text}]${eq}]`;
};

export function writeWrkScript(dir: string, name: string, bodies: readonly SignedBody[], keyId: string, dataSetId: string): string {
  const file = join(dir, `${name}.lua`);
  const lines = ['local bodies = {'];
  for (const b of bodies) lines.push(`  {${luaString(b.body)}, "${b.signature}"},`);
  lines.push('}');
  lines.push(`local requests = {}
for i, b in ipairs(bodies) do
  requests[i] = wrk.format("POST", "/v1/events", {
    ["Host"] = "localhost",
    ["Content-Type"] = "application/json",
    ["Accept"] = "application/json",
    ["X-Service-Key-Id"] = "${keyId}",
    ["X-Service-Data-Set"] = "${dataSetId}",
    ["X-Service-Signature"] = b[2],
  }, b[1])
end
bodies = nil
local n = #requests
local i = math.random(n)
request = function()
  i = i + 1
  if i > n then i = 1 end
  return requests[i]
end`);
  writeFileSync(file, lines.join('\n'));
  return file;
}

function toMs(value: string, unit: string): number {
  const n = Number(value);
  return unit === 'us' ? n / 1000 : unit === 's' ? n * 1000 : unit === 'm' ? n * 60_000 : n;
}

export async function runWrk(url: string, script: string, options: { seconds: number; connections: number; threads: number }): Promise<WrkResult> {
  const wrk = ensureWrk();
  const child = spawn(
    wrk,
    ['-t', String(options.threads), '-c', String(options.connections), '-d', `${options.seconds}s`, '--latency', '--timeout', '10s', '-s', script, url],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (t: string) => (output += t));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  if (code !== 0) throw new Error(`wrk exited with ${code}:\n${output}`);
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(output)?.[1] ?? 'NaN');
  const total = Number(/(\d+) requests in/.exec(output)?.[1] ?? 'NaN');
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(output)?.[1] ?? '0');
  const pct = (p: string) => {
    const m = new RegExp(`\\s${p}%\\s+([\\d.]+)(us|ms|s|m)`).exec(output);
    return m ? toMs(m[1]!, m[2]!) : Number.NaN;
  };
  const errors = /Socket errors:.*$/m.exec(output)?.[0] ?? '';
  return { requestsPerSecond: rps, non2xx, totalRequests: total, p50Ms: pct('50'), p99Ms: pct('99'), errors };
}
