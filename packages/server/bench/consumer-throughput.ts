/**
 * Throughput of the merged-view consumer alone, on the embedded store (SQLite), in events/s: the
 * consumer-alone scenario of `npm run bench` (consumer-backlog.ts) on its own.
 *
 *   node packages/server/dist/bench/consumer-throughput.js [events=1000000] [max-seconds=900] [data-sets=2 (or 1)]
 *
 * Builds a backlog of realistic ~1 KB events (five identifiers each, 30% re-sends of earlier ids,
 * two data sets) straight through the queue class, then times the real `ecapi-ingest worker`
 * draining it, and reports events/s and peak RSS. Prints one JSON line. Figures: bench/README.md.
 */
import { availableParallelism } from 'node:os';
import { runConsumerScenario } from './consumer-backlog.js';

const events = Number(process.argv[2] ?? 1_000_000);
const maxSeconds = Number(process.argv[3] ?? 900);
const dataSets = Number(process.argv[4] ?? 2) === 1 ? 1 : 2;
const result = await runConsumerScenario({ events, maxSeconds, dataSets, log: (line) => process.stderr.write(`${line}\n`) });
console.log(JSON.stringify({ bench: 'consumer-throughput', store: 'sqlite', ...result, cpus: availableParallelism(), node: process.version }));
process.exit(0);
