/**
 * Scale-out benchmark: events/s of the embedded profile (SQLite) next to the PostgreSQL profile
 * with 1 and 3 `serve` nodes, on this machine. wrk drives HTTP/1.1 keep-alive over TLS 1.3 with
 * pre-signed bodies (one wrk per node for 3 nodes, the connections split between them). Every
 * node runs `--workers 1 --no-worker`, limits raised out of the way.
 *
 * Everything shares the machine's cores: wrk, the nodes and PostgreSQL itself (a throwaway
 * cluster with fsync on: every acknowledgement waited for a WAL flush). On a 2-core machine three
 * nodes cannot be faster than one; the figures show what the database costs per event and where
 * the CPU goes, not a scale-out gain (that needs machines).
 *
 *   ECAPI_TEST_DATABASE_URL=$(scripts/pg-test-cluster.sh start) npm run build && \
 *     node packages/server/dist/bench/postgres-bench.js [--seconds 8]
 */
import { writeFileSync, mkdirSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { main } from '../src/cli/main.js';
import { startServer, tempDataDir, type ServerProcess } from '../test/helpers/server-process.js';
import { freshDatabase } from '../test/helpers/postgres.js';
import { signedBodies } from './bench-events.js';
import { ensureWrk, runWrk, writeWrkScript } from './wrk-runner.js';
import { UNLIMITED } from './bench-service.js';

const SECONDS = Number(process.argv[process.argv.indexOf('--seconds') + 1] || 8) || 8;
const CONNECTIONS = 24;
const DS = 'bench';
const SCENARIOS = [
  { name: 'batch-1', events: 1, bodies: 4000 },
  { name: 'batch-100', events: 100, bodies: 200 },
];

interface Row {
  profile: string;
  scenario: string;
  rps: number;
  eps: number;
  p50: number;
  p99: number;
  non2xx: number;
}

async function cli(dataDir: string, databaseUrl: string | undefined, args: string[]): Promise<any> {
  let stdout = '';
  let stderr = '';
  const code = await main(['--data-dir', dataDir, ...(databaseUrl ? ['--database-url', databaseUrl] : []), '--json', ...args], {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
    env: process.env,
  });
  if (code !== 0) throw new Error(stderr);
  return stdout.trim() ? JSON.parse(stdout) : null;
}

async function runProfile(label: string, nodesCount: number, databaseUrl: string | undefined): Promise<Row[]> {
  const dataDir = tempDataDir('ecapi-pgbench-');
  await cli(dataDir, databaseUrl, ['data-set', 'create', DS]);
  await cli(dataDir, databaseUrl, ['data-set', 'limits', DS, ...UNLIMITED]);
  const key = await cli(dataDir, databaseUrl, ['key', 'create', '--data-set', DS]);
  const extraEnv: Record<string, string> = databaseUrl ? { ECAPI_DATABASE_URL: databaseUrl } : {};
  const nodes: ServerProcess[] = [];
  nodes.push(await startServer({ dataDir, args: ['--workers', '1', '--no-worker'], extraEnv }));
  for (let i = 1; i < nodesCount; i++) nodes.push(await startServer({ dataDir, args: ['--workers', '1', '--no-worker'], extraEnv }));
  const rows: Row[] = [];
  try {
    for (const s of SCENARIOS) {
      const script = writeWrkScript(dataDir, s.name, signedBodies(DS, key.secret, s.events, s.bodies), key.key_id, DS);
      const results = await Promise.all(
        nodes.map((n) => runWrk(`https://127.0.0.1:${n.port}`, script, { seconds: SECONDS, connections: Math.ceil(CONNECTIONS / nodes.length), threads: 1 })),
      );
      const rps = results.reduce((a, r) => a + r.requestsPerSecond, 0);
      const row: Row = {
        profile: label,
        scenario: `${s.events} event(s)/request`,
        rps: Math.round(rps),
        eps: Math.round(rps * s.events),
        p50: Math.max(...results.map((r) => r.p50Ms)),
        p99: Math.max(...results.map((r) => r.p99Ms)),
        non2xx: results.reduce((a, r) => a + r.non2xx, 0),
      };
      rows.push(row);
      process.stderr.write(`${label}\t${row.scenario}\t${row.rps} req/s\t${row.eps} events/s\tp50 ${row.p50} ms\tp99 ${row.p99} ms\tnon-2xx ${row.non2xx}\n`);
    }
  } finally {
    await Promise.all(nodes.map((n) => n.stop()));
  }
  return rows;
}

const url = process.env.ECAPI_BENCH_DATABASE_URL || process.env.ECAPI_TEST_DATABASE_URL;
if (!url) {
  process.stderr.write('set ECAPI_TEST_DATABASE_URL (scripts/pg-test-cluster.sh start prints one)\n');
  process.exit(2);
}
ensureWrk();
const rows = [
  ...(await runProfile('embedded (SQLite), 1 node', 1, undefined)),
  ...(await runProfile('PostgreSQL, 1 node', 1, await freshDatabase('bench1'))),
  ...(await runProfile('PostgreSQL, 3 nodes', 3, await freshDatabase('bench3'))),
];
const md = [
  `# PostgreSQL profile benchmark`,
  '',
  `${new Date().toISOString()}, ${availableParallelism()} cores (${cpus()[0]?.model ?? 'cpu'}), ${SECONDS} s per run, ${CONNECTIONS} connections in total;`,
  'wrk, the nodes and PostgreSQL share the same cores. Every node: `serve --workers 1 --no-worker`.',
  '',
  '| profile | request | req/s | events/s | p50 ms | p99 ms | non-2xx |',
  '|---|---|---:|---:|---:|---:|---:|',
  ...rows.map((r) => `| ${r.profile} | ${r.scenario} | ${r.rps} | ${r.eps} | ${r.p50} | ${r.p99} | ${r.non2xx} |`),
  '',
].join('\n');
const dir = fileURLToPath(new URL('../../bench/results/', import.meta.url));
mkdirSync(dir, { recursive: true });
writeFileSync(join(dir, 'postgres-last-run.md'), md);
process.stdout.write(md);
