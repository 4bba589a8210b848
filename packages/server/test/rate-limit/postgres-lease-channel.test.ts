/**
 * rate-limit/postgres-lease-channel.ts while its database cannot be reached (a real pg pool pointed
 * at a port nothing listens on, so every connection is refused): every refill fails open with what
 * the request needs; the database is tried at most once per TRY_WHILE_FAILING_MS, not once per
 * refill (each try would add the pool's connect time-out to a request while a host is unreachable);
 * the failure is said once. The limits themselves against a live database are in
 * test/cluster (the cluster-wide limiter) and the black-box rate-limit tests.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { createPool } from '../../src/postgres/database.js';
import { PostgresLeaseChannel, TRY_WHILE_FAILING_MS } from '../../src/rate-limit/postgres-lease-channel.js';
import type { LeaseReply, LeaseRequest } from '../../src/rate-limit/lease-protocol.js';

/** A loopback port that was free a moment ago: connections to it are refused. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const limits = { rps: 10, burstRps: 20, burstSeconds: 5, eps: 1000 };
const take = (id: number): LeaseRequest => ({
  type: 'ecapi:rl-take',
  id,
  dataSetId: 'shop',
  limits,
  need: { requests: 1, events: 100 },
  want: { requests: 5, events: 500 },
  giveBack: id % 2 === 0 ? [{ dataSetId: 'shop', limits, requests: 2, events: 10, second: Math.floor(Date.now() / 1000) }] : [],
});

test('database unreachable: refills fail open at once, the database is tried at most once a second, the failure is said once', async () => {
  const pool = createPool(`postgres://ecapi@127.0.0.1:${await closedPort()}/postgres`, 'production', { max: 2 });
  let queries = 0;
  const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<unknown>;
  (pool as unknown as { query: (...args: unknown[]) => Promise<unknown> }).query = (...args: unknown[]) => {
    queries++;
    return query(...args);
  };
  const errors: string[] = [];
  const channel = new PostgresLeaseChannel(pool, { onError: (e) => errors.push(e.message) });
  const replies = new Map<number, LeaseReply>();
  channel.onMessage((m) => replies.set((m as LeaseReply).id, m as LeaseReply));
  const sendAndWait = async (ids: number[]) => {
    for (const id of ids) channel.send(take(id));
    const deadline = Date.now() + 15_000;
    while (!ids.every((id) => replies.has(id)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  };
  try {
    await sendAndWait([1]); // the first refill finds the database away
    assert.equal(queries, 1);
    assert.deepEqual(errors.length, 1);
    const started = Date.now();
    await sendAndWait([2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    const elapsed = Date.now() - started;
    for (let id = 1; id <= 11; id++) {
      const reply = replies.get(id);
      assert.ok(reply, `reply ${id}`);
      assert.equal(reply.ok, true, 'fails open');
      assert.deepEqual(reply.granted, { requests: 1, events: 100 }, 'grants what the request needs');
    }
    if (elapsed < TRY_WHILE_FAILING_MS) assert.equal(queries, 1, 'no refill within the second went to the database, give-backs included');
    await new Promise((r) => setTimeout(r, TRY_WHILE_FAILING_MS + 50));
    const before = queries;
    await sendAndWait([12, 13, 14, 15]);
    assert.ok(queries - before >= 1 && queries - before <= 2, `a second later the database is tried again, once (with a give-back: twice): ${queries - before}`);
    assert.equal(errors.length, 1, 'the failure was said once');
  } finally {
    await pool.end();
  }
});
