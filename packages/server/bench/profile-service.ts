/**
 * Where does the time go? Runs the real service under `node --cpu-prof` with one wrk scenario,
 * then prints the functions with the most self time for each thread (serving thread, queue writer)
 * and the service's own commit metrics.
 *
 *   node packages/server/dist/bench/profile-service.js [single|batch100|batch1000] [seconds]
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startBenchService } from './bench-service.js';
import { runWrk } from './wrk-runner.js';

interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[];
  samples: number[];
  timeDeltas: number[];
}

function topSelfTime(profile: CpuProfile, count: number): string[] {
  const timeById = new Map<number, number>();
  profile.samples.forEach((id, i) => timeById.set(id, (timeById.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
  const byFunction = new Map<string, number>();
  let total = 0;
  for (const node of profile.nodes) {
    const t = timeById.get(node.id) ?? 0;
    total += t;
    const f = node.callFrame;
    const key = `${f.functionName || '(anonymous)'} ${f.url.split('/').slice(-2).join('/')}:${f.lineNumber}`;
    byFunction.set(key, (byFunction.get(key) ?? 0) + t);
  }
  return [...byFunction.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([name, t]) => `${((t / total) * 100).toFixed(1).padStart(5)}%  ${name}`);
}

async function main(): Promise<void> {
  const scenario = process.argv[2] ?? 'single';
  const seconds = Number(process.argv[3] ?? 6);
  const profileDir = mkdtempSync(join(tmpdir(), 'ecapi-prof-'));
  const { server, script } = await startBenchService({ scenario, nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] });
  const result = await runWrk(`https://127.0.0.1:${server.port}`, script, { seconds, connections: 50, threads: 2 });
  const metrics = await (await fetch(`http://127.0.0.1:${server.adminPort}/metrics`)).text();
  await server.stop();
  process.stdout.write(`${scenario}: ${result.requestsPerSecond.toFixed(0)} req/s, p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms, non-2xx ${result.non2xx}\n`);
  for (const line of metrics.split('\n')) {
    if (/^ecapi_queue_commit_(seconds|batch_requests|batch_events)_(sum|count) /.test(line)) process.stdout.write(`${line}\n`);
  }
  for (const file of readdirSync(profileDir).sort()) {
    process.stdout.write(`\n${file} (thread ${file.split('.').at(-3)}):\n`);
    for (const line of topSelfTime(JSON.parse(readFileSync(join(profileDir, file), 'utf8')) as CpuProfile, 20)) {
      process.stdout.write(`${line}\n`);
    }
  }
  process.stdout.write(`\nprofiles: ${profileDir} (open in Chrome DevTools)\n`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
