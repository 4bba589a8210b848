/**
 * The service set up for one wrk scenario, as the profiling tools need it: a fresh data dir, the
 * bench data set with its rate limits raised (what is measured is the service, not the limiter),
 * the real `serve` binary, and the wrk script of pre-signed bodies.
 */
import { cliJson, provision, startServer, tempDataDir, type ServerProcess } from '../test/helpers/server-process.js';
import { signedBodies } from './bench-events.js';
import { writeWrkScript } from './wrk-runner.js';

export const BENCH_DATA_SET = 'bench';

/** `data-set limits` arguments that take the limiter out of the measurement. */
export const UNLIMITED = ['--rps', '10000000', '--burst-rps', '20000000', '--burst-seconds', '1', '--eps', '1000000000'];

/** Events per request of a scenario name: single, batch100, batch1000. */
export function eventsOf(scenario: string): number {
  return scenario === 'single' ? 1 : scenario === 'batch100' ? 100 : 1000;
}

/** Provisions a data dir, starts `serve --workers 1 --no-worker` (plus `serveArgs`), writes the scenario's wrk script. */
export async function startBenchService(options: {
  readonly scenario: string;
  readonly serveArgs?: readonly string[];
  readonly nodeArgs?: readonly string[];
}): Promise<{ server: ServerProcess; script: string; events: number }> {
  const events = eventsOf(options.scenario);
  const dataDir = tempDataDir('ecapi-bench-service-');
  const creds = await provision(dataDir, [BENCH_DATA_SET]);
  await cliJson(dataDir, ['data-set', 'limits', BENCH_DATA_SET, ...UNLIMITED]);
  const server = await startServer({
    dataDir,
    args: ['--workers', '1', '--no-worker', ...(options.serveArgs ?? [])],
    ...(options.nodeArgs ? { nodeArgs: [...options.nodeArgs] } : {}),
  });
  const bodies = signedBodies(BENCH_DATA_SET, creds.secret, events, events === 1 ? 5000 : 40);
  return { server, script: writeWrkScript(dataDir, options.scenario, bodies, creds.keyId, BENCH_DATA_SET), events };
}
