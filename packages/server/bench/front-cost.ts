/**
 * What reading each connection's first bytes before TLS (http/connection-front.ts: plain-HTTP
 * answer, PROXY header) and the shedder's verified pairs cost on the hot path, against another
 * build of the same ladder servers (e.g. a worktree of main before the change).
 *
 * Two rungs of ladder-server.ts from each build, started side by side and measured in alternating
 * passes (a busy spell of the shared machine falls on both alike), with wrk:
 * - `http2` (the TLS server alone + the reference handler) with `Connection: close` on every
 *   request: one new TCP + TLS connection per request, the path the first-bytes read is on;
 * - `service` (the whole request path, shedder included) over keep-alive connections.
 * Reported: the server process's CPU µs per request (all threads, from /proc) and req/s, medians,
 * and the median of the per-pass differences (this build − the other).
 *
 * Usage: node packages/server/dist/bench/front-cost.js <other build's dist/bench/ladder-server.js> [seconds=5] [rounds=3]
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { provision, tempDataDir } from '../test/helpers/server-process.js';
import { signedBodies } from './bench-events.js';
import { measureCpuPerRequest, startRung } from './ladder.js';
import { writeWrkScript } from './wrk-runner.js';

async function main(): Promise<void> {
  const other = process.argv[2];
  if (!other) throw new Error('usage: front-cost.js <other ladder-server.js> [seconds] [rounds]');
  const seconds = Number(process.argv[3] ?? 5);
  const rounds = Number(process.argv[4] ?? 3);
  const self = fileURLToPath(new URL('./ladder-server.js', import.meta.url));
  const dataDir = tempDataDir('ecapi-bench-front-');
  const creds = await provision(dataDir, ['bench']);
  const dir = mkdtempSync(join(tmpdir(), 'ecapi-front-wrk-'));
  const keepAlive = writeWrkScript(dir, 'keep-alive', signedBodies('bench', creds.secret, 1, 200), creds.keyId, 'bench');
  const close = join(dir, 'close.lua');
  writeFileSync(close, readFileSync(keepAlive, 'utf8').replace('["Host"] = "localhost",', '["Host"] = "localhost", ["Connection"] = "close",'));
  const cases = [
    { name: 'http2 rung, new connection per request', rung: 'http2', script: close, wrk: { seconds, connections: 8, threads: 1 } },
    { name: 'service rung, keep-alive', rung: 'service', script: keepAlive, wrk: { seconds, connections: 16, threads: 1 } },
  ];
  const builds = [{ build: 'this build', script: self }, { build: 'other build', script: other }];
  const servers: { build: string; case: (typeof cases)[number]; pid: number; port: number; stop: () => Promise<void> }[] = [];
  try {
    for (const c of cases) for (const b of builds) servers.push({ build: b.build, case: c, ...(await startRung(c.rung, dataDir, creds.secret, b.script)) });
    const samples = new Map(servers.map((s) => [s, [] as { rps: number; us: number; non2xx: number }[]]));
    for (let round = 0; round <= rounds; round++) {
      for (const s of servers) {
        const wrk = round === 0 ? { ...s.case.wrk, seconds: 1 } : s.case.wrk;
        const { result, processUs } = await measureCpuPerRequest(s.pid, `https://127.0.0.1:${s.port}`, s.case.script, wrk);
        if (round > 0) samples.get(s)!.push({ rps: result.requestsPerSecond, us: processUs, non2xx: result.non2xx });
      }
    }
    const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
    for (const s of servers) {
      const rows = samples.get(s)!;
      process.stdout.write(`${JSON.stringify({
        case: s.case.name, build: s.build,
        rps: Math.round(median(rows.map((r) => r.rps))),
        process_us_per_request: Math.round(median(rows.map((r) => r.us))),
        samples_us: rows.map((r) => Math.round(r.us)),
        non2xx: rows.reduce((n, r) => n + r.non2xx, 0),
      })}\n`);
    }
    // Paired: each pass measured this build and the other one back to back.
    for (const c of cases) {
      const [mine, theirs] = builds.map((b) => samples.get(servers.find((s) => s.case === c && s.build === b.build)!)!);
      const diffs = mine!.map((r, i) => r.us - theirs![i]!.us);
      process.stdout.write(`${JSON.stringify({ case: c.name, paired_difference_us_median: Math.round(median(diffs)), paired_differences_us: diffs.map(Math.round) })}\n`);
    }
  } finally {
    for (const s of servers) await s.stop();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
