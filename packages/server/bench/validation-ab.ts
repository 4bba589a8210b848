/**
 * A/B of the per-event validation path of two builds in one process: CPU time of the measuring
 * thread per event (process.threadCpuUsage), so that it survives a shared machine far better than
 * throughput. Both builds are loaded from their own dist/ and measured alternately (the order
 * flips every round), 100,000 events per measurement after a warm-up; medians are printed.
 * Accepted: the realistic event of validation-bench.ts. Rejected: six kinds of rejection, each
 * also given its stored form and metric label, as the request path does.
 * A build's processor is called through evaluate() when it has one, else check() (older builds).
 *
 *   node packages/server/dist/bench/validation-ab.js <repo root A> <repo root B> [rounds=7]
 *
 * The first build loaded tends to measure a few per cent faster: run it twice, roots swapped.
 */
import { pathToFileURL } from 'node:url';

type Outcome = { ok: true } | { ok: false; error: string | { code: string; message: string } };
interface Build {
  readonly root: string;
  run(event: unknown, context: unknown): Outcome;
  storedReasonOf(error: unknown): string;
  rejectionReasonOf(codeOrMessage: string): string;
  readonly policy: unknown;
  realisticEvent(nowSeconds: number, gpp: string): Record<string, unknown>;
  usnatString(): string;
}

async function load(root: string): Promise<Build> {
  // The builds are loaded by path: their types are not this build's.
  const d = (p: string) => import(pathToFileURL(`${root}/packages/server/dist/${p}`).href) as Promise<Record<string, any>>;
  const [processorModule, stored, metrics, policy, bench] = await Promise.all([
    d('src/validation/event-processor.js'), d('src/validation/stored-reason.js'), d('src/observability/service-metrics.js'),
    d('src/control/data-set-policy.js'), d('bench/validation-bench.js'),
  ]);
  const processor = processorModule.createEventProcessor();
  return {
    root,
    run: (processor.evaluate ?? processor.check).bind(processor),
    storedReasonOf: stored.storedReasonOf,
    rejectionReasonOf: metrics.rejectionReasonOf,
    policy: policy.DEFAULT_POLICY,
    realisticEvent: bench.realisticEvent,
    usnatString: bench.usnatString,
  };
}

const cpuMicros = (): number => {
  const u = process.threadCpuUsage();
  return u.user + u.system;
};

async function main(): Promise<void> {
  const [rootA, rootB] = [process.argv[2], process.argv[3]];
  if (!rootA || !rootB) throw new Error('usage: validation-ab.js <repo root A> <repo root B> [rounds]');
  const rounds = Number(process.argv[4] ?? 7);
  const builds = [await load(rootA), await load(rootB)] as const;
  const now = Math.floor(Date.now() / 1000);
  const context = { nowSeconds: now, policy: builds[0].policy };
  const good = JSON.stringify(builds[0].realisticEvent(now, builds[0].usnatString()));
  const bad = [
    (e: any) => { e.user_data.email_address[1] = 'mary@example.com'; },
    (e: any) => { e.properties.items[2].nick = 'x'; },
    (e: any) => { e.currency_code = 'XXX'; },
    (e: any) => { e.timestamp = now - 10_000_000; },
    (e: any) => { delete e.event_type; },
    (e: any) => { e.source = 'fax'; },
  ].map((mutate) => { const e = JSON.parse(good); mutate(e); return JSON.stringify(e); });
  let sink = 0;
  const measure = (build: Build, rejected: boolean, pools: unknown[][]): number => {
    let micros = 0;
    let events = 0;
    for (const pool of pools) {
      const start = cpuMicros();
      for (let i = 0; i < pool.length; i++) {
        const out = build.run(pool[i], context);
        if (out.ok !== !rejected) throw new Error(`unexpected outcome in ${build.root}`);
        if (out.ok) continue;
        const error = out.error;
        if (typeof error === 'string') sink += build.storedReasonOf(error).length + build.rejectionReasonOf(error).length;
        else sink += build.storedReasonOf(error).length + build.rejectionReasonOf(error.code).length + error.message.length;
      }
      micros += cpuMicros() - start;
      events += pool.length;
    }
    return (micros * 1000) / events;
  };
  const pools = (rejected: boolean, n = 100): unknown[][] =>
    Array.from({ length: n }, () => Array.from({ length: 1000 }, (_, i) => JSON.parse(rejected ? bad[i % bad.length]! : good)));
  const median = (xs: number[]): number => Math.round([...xs].sort((a, b) => a - b)[xs.length >> 1]!);
  const result: Record<string, unknown> = {};
  for (const rejected of [false, true]) {
    for (const build of builds) measure(build, rejected, pools(rejected, 20));
    const ns: [number[], number[]] = [[], []];
    for (let r = 0; r < rounds; r++) {
      for (const k of r % 2 === 0 ? [0, 1] as const : [1, 0] as const) ns[k].push(measure(builds[k], rejected, pools(rejected)));
    }
    result[rejected ? 'rejected_ns_per_event' : 'accepted_ns_per_event'] = { A: median(ns[0]), B: median(ns[1]) };
  }
  console.log(JSON.stringify({ A: rootA, B: rootB, ...result, rounds, events_per_measurement: 100_000, node: process.version, checksum: sink > 0 }));
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) void main();
