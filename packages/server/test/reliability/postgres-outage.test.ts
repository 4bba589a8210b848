/**
 * PostgreSQL outage mid-traffic: a real `serve` (with its consumer; once single-process, once
 * `--workers 2`) on a database of its own, senders posting signed batches without pause, and the
 * database cut off under them (ALLOW_CONNECTIONS false, every backend of it terminated) for a few
 * seconds, then let back. Every request gets an answer, and every answer is 200 (stored) or 500
 * `ingest backend unavailable` (not acknowledged, safe to retry), never anything else and never a
 * hang; readiness turns false while the database is gone and true again after, without a restart;
 * requests get 200 again and the consumer catches up; every event answered 200 is in the queue and
 * in the merged view, and the events answered 500, sent again, are stored with exactly one merged
 * record per id. Nothing the service logged contains a secret or an event's content. The shared
 * cluster itself is never stopped: only this test's database is cut off (and dropped at the end).
 * And the same outage on an idle node, with no sender at all: readiness follows it all the same.
 *
 * Runs when ECAPI_TEST_DATABASE_URL is set (a superuser there: ALTER DATABASE, pg_terminate_backend),
 * whatever ECAPI_TEST_PROFILE says. The embedded profile's counterpart: storage-faults.test.ts.
 */
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import pg from 'pg';
import { main } from '../../src/cli/main.js';
import { databaseUrlFor, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { postSigned, sampleEvent, type Credentials, type HttpResult } from '../helpers/https-client.js';
import { freshDatabase, pgCli, pgOnly, TEST_DATABASE_URL } from '../helpers/postgres.js';
import { killTree, metricsText, metricValue, readyz, waitFor } from '../helpers/fault-tools.js';

const DS = 'outage';
/** Far beyond the service's own bounds (statement_timeout 30 s, connection timeout 10 s): past it a request hung. */
const HANG_MS = 60_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One statement on a superuser connection to the server's maintenance database (never to the database under test). */
async function superuser(text: string, params: unknown[] = []): Promise<void> {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  try {
    await client.query(text, params);
  } finally {
    await client.end();
  }
}

/** The database goes away: no new connection is allowed, every open one is terminated. */
async function cutOff(db: string): Promise<void> {
  await superuser(`ALTER DATABASE ${db} ALLOW_CONNECTIONS false`);
  await superuser('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [db]);
}

async function restore(db: string): Promise<void> {
  await superuser(`ALTER DATABASE ${db} ALLOW_CONNECTIONS true`);
}

/** Runs the CLI in-process against the database; its stdout (NDJSON commands). Throws on a non-zero exit. */
async function cliText(dataDir: string, url: string, args: string[]): Promise<string> {
  let stdout = '';
  let stderr = '';
  const code = await main(['--data-dir', dataDir, '--database-url', url, ...args], {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
    env: process.env,
  });
  if (code !== 0) throw new Error(`ecapi-ingest ${args.join(' ')} failed (${code}): ${stderr}`);
  return stdout;
}
/**
 * No sender at all: the queue's idle probe (queue-health.ts) is what notices. Without it readiness
 * stayed 200 through the whole outage, until a sender's request failed.
 */
async function idleScenario(): Promise<void> {
  const { dataDir, url, db, started } = await scenarioDatabase('idleoutage');
  const srv = started(await startServer({ dataDir, extraEnv: { ECAPI_DATABASE_URL: url } }));
  assert.equal((await readyz(srv.adminPort)).status, 200);

  await cutOff(db);
  const down = await waitFor('readiness to turn false with no request', async () => {
    const r = await readyz(srv.adminPort);
    return r.status === 503 ? r : undefined;
  }, 60_000, 200);
  assert.equal(down.body.checks.queue_writable, false);
  assert.ok(down.body.checks.queue_error, 'readiness says why');
  assert.equal(metricValue(await metricsText(srv.adminPort), 'ecapi_queue_writable'), 0);
  // Held a few seconds more: every loop that polls the database (each second or so) meets it away.
  await sleep(5000);

  await restore(db);
  await waitFor('readiness to return with no request', async () => ((await readyz(srv.adminPort)).status === 200 ? true : undefined), 60_000, 200);
  assert.equal(await srv.stop(), 0);
  const logged = loggedLines(srv.output());
  assert.equal(logged.filter((l) => l.msg.startsWith('queue storage failing')).length, 1, 'the failure is logged once');
  assert.equal(logged.filter((l) => l.msg === 'queue storage recovered').length, 1, 'the recovery is logged once');
  // Nothing is said once per try: each warning or error, with its cause, at most once per process
  // (this serving process and its consumer), however many times its loop met the database away.
  assert.deepEqual(saidMoreThan(logged, 2), [], 'lines said more than once per process');
  await leftovers.pop()!();
}

/**
 * A data dir and a database of its own, migrated; both dropped when the scenario ends (by the
 * after hook, with the server given to `started`, when it failed half-way).
 */
async function scenarioDatabase(prefix: string): Promise<{ dataDir: string; url: string; db: string; started: (server: ServerProcess) => ServerProcess }> {
  const dataDir = tempDataDir(`ecapi-pg-${prefix}-`);
  // Under ECAPI_TEST_PROFILE=postgres startServer picks the data dir's own database: use that one.
  const url = (await databaseUrlFor(dataDir)) ?? (await freshDatabase(prefix));
  const db = new URL(url).pathname.slice(1);
  let server: ServerProcess | undefined;
  leftovers.push(async () => {
    if (server && server.child.exitCode === null && server.child.signalCode === null) killTree(server.child.pid!);
    await superuser(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
    rmSync(dataDir, { recursive: true, force: true });
  });
  await pgCli(dataDir, url, ['migrate']);
  return { dataDir, url, db, started: (s) => (server = s) };
}

interface LogLine {
  level: number;
  msg: string;
  status?: number;
  err?: { message?: string };
}

const loggedLines = (output: string): LogLine[] => output.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as LogLine);

/** Warnings and errors other than a request's own line, with their cause, said more than `most` times. */
function saidMoreThan(logged: readonly LogLine[], most: number): [string, number][] {
  const said = new Map<string, number>();
  for (const l of logged) {
    if (l.level < 40 || l.status !== undefined) continue;
    const what = `${l.msg} | ${l.err?.message ?? ''}`;
    said.set(what, (said.get(what) ?? 0) + 1);
  }
  return [...said].filter(([, n]) => n > most);
}

const ndjson = (text: string) => text.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l));

type Phase = 'before' | 'outage' | 'restored';

interface Sent {
  readonly body: string;
  readonly ids: readonly string[];
  /** The phase when the request was sent, and when it was answered. */
  readonly sentIn: Phase;
  answeredIn?: Phase;
  res?: HttpResult;
  error?: string;
}

/** Cleanup of whatever a scenario left behind when it failed half-way. */
const leftovers: (() => Promise<void>)[] = [];
after(async () => {
  for (const cleanup of leftovers.splice(0).reverse()) await cleanup().catch(() => undefined);
});

async function scenario(workers: number, diagnostic: (text: string) => void): Promise<void> {
  const { dataDir, url, db, started } = await scenarioDatabase('outage');
  await pgCli(dataDir, url, ['data-set', 'create', DS]);
  const key = await pgCli(dataDir, url, ['key', 'create', '--data-set', DS]);
  const creds: Credentials = { keyId: key.key_id, secret: key.secret };
  // A value carried by every event, looked for in the service's output at the end.
  const canary = `canary-${Math.random().toString(36).slice(2)}`;

  const srv = started(await startServer({ dataDir, args: ['--workers', String(workers)], extraEnv: { ECAPI_DATABASE_URL: url } }));

  const send = (body: string): Promise<HttpResult> =>
    Promise.race([
      postSigned(srv.port, srv.ca, creds, DS, body),
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`request hung for ${HANG_MS} ms`)), HANG_MS).unref()),
    ]);

  // --- senders: 4 loops posting batches of 1 to 3 events (a single event as a bare object too) ---
  let phase: Phase = 'before';
  let sending = true;
  const sent: Sent[] = [];
  const senders = Array.from({ length: 4 }, async (_, s) => {
    for (let r = 0; sending; r++) {
      const n = 1 + ((s + r) % 3);
      const events = Array.from({ length: n }, (_, e) => sampleEvent(DS, { id: `w${workers}-s${s}-r${r}-e${e}`, ext: { note: canary } }));
      const body = JSON.stringify(n === 1 && r % 2 === 0 ? events[0] : { events });
      const entry: Sent = { body, ids: events.map((e) => e.id as string), sentIn: phase };
      sent.push(entry);
      try {
        entry.res = await send(body);
      } catch (error) {
        entry.error = (error as Error).message;
      }
      entry.answeredIn = phase;
      await sleep(10);
    }
  });
  const answered = (p: Phase, status?: number) => sent.filter((x) => x.answeredIn === p && (status === undefined || x.res?.status === status));

  // Readiness, polled all along.
  const readiness: { phase: Phase; status: number; body: any }[] = [];
  let polling = true;
  const poller = (async () => {
    while (polling) {
      const r = await readyz(srv.adminPort).catch((error: Error) => ({ status: 0, body: error.message }));
      readiness.push({ phase, ...r });
      await sleep(100);
    }
  })();

  try {
    await waitFor('some 200s before the cut', () => answered('before', 200).length >= 20, 30_000);
    assert.equal((await readyz(srv.adminPort)).status, 200);

    // --- the outage ---
    phase = 'outage';
    await cutOff(db);
    await waitFor('500s during the outage', () => answered('outage', 500).length >= 10, 30_000);
    const down = await waitFor('readiness to turn false', async () => {
      const r = await readyz(srv.adminPort);
      return r.status === 503 ? r : undefined;
    }, 30_000);
    assert.equal(down.body.ready, false);
    assert.equal(down.body.checks.queue_writable, false);
    assert.ok(down.body.checks.queue_error, 'readiness says why');
    const failing = await metricsText(srv.adminPort);
    assert.equal(metricValue(failing, 'ecapi_queue_writable'), 0);
    assert.ok(metricValue(failing, 'ecapi_queue_commit_failures_total') >= 1, 'failed commits are counted');
    // Held a few seconds more: the probes and the consumer meet a database that stays away.
    await sleep(3000);
    assert.equal((await readyz(srv.adminPort)).status, 503, 'still not ready while the database is away');

    // --- the database comes back: recovery without a restart ---
    await restore(db);
    // No request is needed for that: the queue probes the database while it is not writable.
    await waitFor('readiness to return', async () => ((await readyz(srv.adminPort)).status === 200 ? true : undefined), 30_000);
    assert.equal(metricValue(await metricsText(srv.adminPort), 'ecapi_queue_writable'), 1);
    phase = 'restored';
    await waitFor('200s again', () => answered('restored', 200).filter((x) => x.sentIn === 'restored').length >= 20, 30_000);
  } finally {
    sending = false;
    polling = false;
    await Promise.all(senders);
    await poller;
  }

  // --- every answer: 200 (stored) or 500 with the spec's body; never an error, never a hang ---
  const acknowledged = new Set<string>();
  const refused: Sent[] = [];
  for (const x of sent) {
    assert.equal(x.error, undefined, `a request got no answer (${x.sentIn} -> ${x.answeredIn}): ${x.error}`);
    const res = x.res!;
    if (res.status === 200) {
      assert.deepEqual(res.json(), { accepted: x.ids.length });
      for (const id of x.ids) acknowledged.add(id);
    } else {
      assert.equal(res.status, 500, `${x.sentIn} -> ${x.answeredIn}: ${res.status} ${res.text}`);
      assert.deepEqual(res.json(), { error: 'ingest backend unavailable' });
      refused.push(x);
    }
  }
  assert.ok(refused.length > 0, 'the outage refused requests');
  diagnostic(`--workers ${workers}: ${sent.length} requests, ${sent.length - refused.length} answered 200, ${refused.length} answered 500`);
  // Answered before the cut: stored. Sent once readiness had returned: stored.
  for (const x of sent.filter((x) => x.answeredIn === 'before' || x.sentIn === 'restored')) {
    assert.equal(x.res!.status, 200, `${x.sentIn} -> ${x.answeredIn}: ${x.res!.text}`);
  }
  // Readiness: ready before, not ready at some point during the outage, ready at the end.
  assert.ok(readiness.some((r) => r.phase === 'outage' && r.status === 503), 'not ready during the outage');
  assert.ok(readiness.every((r) => r.status === 200 || r.status === 503), `readiness always answered: ${JSON.stringify(readiness.find((r) => r.status !== 200 && r.status !== 503))}`);
  assert.equal(readiness.at(-1)!.status, 200);

  // --- every event answered 200 is queued ---
  const queued = new Map<string, number>();
  for (const record of ndjson(await cliText(dataDir, url, ['queue', 'export', '--data-set', DS]))) {
    queued.set(record.event.id, (queued.get(record.event.id) ?? 0) + 1);
  }
  for (const id of acknowledged) assert.ok(queued.has(id), `acknowledged event ${id} is queued`);
  // A 500 may still have been stored (a commit whose connection was terminated has an unknown
  // outcome): allowed, the re-send below merges with it.

  // --- the retries the spec allows succeed ---
  for (const x of refused) {
    const res = await send(x.body);
    assert.equal(res.status, 200, res.text);
    for (const id of x.ids) acknowledged.add(id);
  }

  // --- the consumer catches up (its supervisor restarts it if the outage ended it), one record per id ---
  const status = await waitFor('the consumer to catch up', async () => {
    const s = await pgCli(dataDir, url, ['worker', 'status']);
    return s.lag_records === 0 && s.queue_last_seq > 0 ? s : undefined;
  }, 90_000, 250);
  assert.equal(status.running, true);
  const merged = new Map<string, number>();
  for (const record of ndjson(await cliText(dataDir, url, ['events', 'export', '--data-set', DS]))) {
    merged.set(record.id, (merged.get(record.id) ?? 0) + 1);
  }
  for (const id of acknowledged) assert.equal(merged.get(id), 1, `event ${id} has exactly one merged record`);
  assert.equal(merged.size, acknowledged.size, 'nothing else in the merged view');
  // And through `events get`, for one of each kind.
  const some = [[...acknowledged][0]!, refused[0]!.ids[0]!];
  for (const id of some) assert.equal((await pgCli(dataDir, url, ['events', 'get', DS, id])).id, id);

  // --- a graceful stop after the outage, then the log: the failure and recovery said, nothing secret ---
  assert.equal(await srv.stop(), 0);
  const output = srv.output();
  assert.ok(!output.includes(creds.secret), 'the key secret is not in the log');
  assert.ok(!output.includes(canary), 'no event content in the log');
  const logged = loggedLines(output);
  assert.ok(logged.some((l) => l.level >= 50 && l.msg.startsWith('queue storage failing')), 'the failure is logged at error level');
  assert.ok(logged.some((l) => l.msg === 'queue storage recovered'), 'the recovery is logged');
  // Each change of state once per serving process, not a line per request (queue-health-log.ts):
  // the rate-limit leases, which fail open while the database is away, too.
  const leaseFailures = logged.filter((l) => l.msg.startsWith('rate-limit lease failed')).length;
  assert.ok(leaseFailures <= workers, `${leaseFailures} "rate-limit lease failed" lines for ${refused.length} refused requests`);
  if (leaseFailures > 0) assert.ok(logged.some((l) => l.msg === 'rate-limit leases recovered'), 'the leases\' recovery is logged');
  // The control plane's poll (every second) and the ingest-stats flush (every second) too: once per
  // process that runs them (the serving processes, and the primary with --workers).
  for (const [failed, recovered] of [
    ['control plane poll failed', 'control plane poll recovered'],
    ['ingest stats flush failed', 'ingest stats flush recovered'],
  ] as const) {
    const lines = logged.filter((l) => l.msg.startsWith(failed)).length;
    assert.ok(lines <= workers + 1, `${lines} "${failed}" lines`);
    if (lines > 0) assert.ok(logged.some((l) => l.msg === recovered), `"${recovered}" is logged`);
  }

  // And nothing else is said once per try: each warning or error other than a request's own line,
  // with its cause, at most once per process (the serving processes, the primary, the consumer).
  assert.deepEqual(saidMoreThan(logged, workers + 2), [], 'lines said more than once per process');

  // Cleanup of this scenario (the after hook does it only when it failed).
  await leftovers.pop()!();
}

describe('PostgreSQL outage mid-traffic', { skip: pgOnly.skip, timeout: 600_000 }, () => {
  test('an idle node: readiness turns false when the database goes away and true when it is back, with no request at all', { timeout: 120_000 }, () => idleScenario());
  test('one serving process: answers 200 or 500, readiness follows, recovery without a restart, nothing lost', { timeout: 240_000 }, (t) => scenario(1, (d) => t.diagnostic(d)));
  test('--workers 2: the same through a primary and two serving processes', { timeout: 240_000 }, (t) => scenario(2, (d) => t.diagnostic(d)));
});
