/**
 * Scale-out, black-box: three `serve` nodes on different ports sharing one PostgreSQL database
 * (and one data dir for the master key and TLS material), separate `worker` processes, senders
 * spread across the nodes. Checks durability (every 200/207 event is queued exactly once, with
 * gapless sequence numbers), control-plane propagation (a revocation made with the CLI reaches
 * every node within 5 s), cluster-wide rate limits (3 nodes admit within 10% of the limit),
 * worker failover (a SIGKILLed worker's partitions are taken over within 30 s; nothing applied
 * twice, nothing skipped) and a SIGKILLed node under load (no acknowledged event lost).
 *
 * Runs when ECAPI_TEST_DATABASE_URL is set (.ci/run sets it), whatever ECAPI_TEST_PROFILE says.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import https from 'node:https';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { signBody } from '@ecapi-ingest/protocol';
import { BIN, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { postSigned, sampleEvent, type Credentials } from '../helpers/https-client.js';
import { freshDatabase, pgCli as pgCliIn, pgOnly, queryDatabase, TEST_DATABASE_URL } from '../helpers/postgres.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('three nodes on one PostgreSQL database', { skip: pgOnly.skip, timeout: 240_000 }, () => {
  let url: string;
  let dataDir: string;
  let nodes: ServerProcess[] = [];
  let creds: Credentials;
  const workerDataSets = Array.from({ length: 12 }, (_, i) => `w${i}`);

  const pgCli = (args: string[]) => pgCliIn(dataDir, url, args);

  const startNode = () => startServer({ dataDir, args: ['--workers', '1', '--no-worker'], extraEnv: { ECAPI_DATABASE_URL: url } });

  const queued = () =>
    queryDatabase<{ first_seq: number; event_count: number; data_set_id: string; raw: boolean; events: string }>(
      url,
      'SELECT first_seq, event_count, data_set_id, raw, events FROM queue_segments ORDER BY first_seq',
    );
  const queuedIds = async () => {
    const ids: string[] = [];
    const seqs: number[] = [];
    for (const row of await queued()) {
      const parsed = JSON.parse(row.events);
      const events: any[] = row.raw ? (Array.isArray(parsed.events) ? parsed.events : [parsed]) : parsed;
      events.forEach((e, i) => {
        ids.push(e.id);
        seqs.push(row.first_seq + i);
      });
    }
    return { ids, seqs };
  };

  function startWorker(): ChildProcess {
    return spawn(process.execPath, [BIN, '--data-dir', dataDir, 'worker', '--batch-size', '200'], {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, ECAPI_DATABASE_URL: url, ECAPI_LOG_LEVEL: 'warn' },
    });
  }

  before(async () => {
    url = await freshDatabase('cluster');
    dataDir = tempDataDir('ecapi-cluster-');
    await pgCli(['migrate']);
    for (const ds of ['mixed', 'limited', ...workerDataSets]) await pgCli(['data-set', 'create', ds]);
    await pgCli(['data-set', 'limits', 'limited', '--rps', '100', '--burst-rps', '100', '--burst-seconds', '1']);
    const key = await pgCli(['key', 'create', '--data-set', 'mixed', '--data-set', 'limited', ...workerDataSets.flatMap((d) => ['--data-set', d])]);
    creds = { keyId: key.key_id, secret: key.secret };
    // The first node creates the TLS material in the shared data dir; the others reuse it.
    nodes.push(await startNode());
    nodes.push(...(await Promise.all([startNode(), startNode()])));
    assert.equal(new Set(nodes.map((n) => n.port)).size, 3);
  });

  after(async () => {
    await Promise.all(nodes.map((n) => n.stop()));
  });

  test('a mixed batch of senders across the nodes: every acknowledged event is queued exactly once, seqs gapless', async () => {
    const acknowledged: string[] = [];
    await Promise.all(
      Array.from({ length: 9 }, async (_, sender) => {
        const node = nodes[sender % 3]!;
        for (let i = 0; i < 30; i++) {
          const size = 1 + ((sender * 7 + i) % 9);
          const events = Array.from({ length: size }, (_, j) => sampleEvent('mixed', { id: `m-s${sender}-r${i}-e${j}` }));
          if (i % 6 === 0 && size > 1) delete events[0]!.timestamp; // a 207
          const res = await postSigned(node.port, node.ca, creds, 'mixed', JSON.stringify({ events }), { http2: sender % 2 === 0 });
          assert.ok(res.status === 200 || res.status === 207, `${res.status} ${res.text}`);
          const rejected = new Set(((res.json().errors ?? []) as { index: number }[]).map((e) => e.index));
          events.forEach((e, j) => !rejected.has(j) && acknowledged.push(e.id as string));
        }
      }),
    );
    const { ids, seqs } = await queuedIds();
    const counts = new Map<string, number>();
    for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
    for (const id of acknowledged) assert.equal(counts.get(id), 1, `acknowledged ${id} queued exactly once`);
    assert.equal(ids.filter((id) => id.startsWith('m-')).length, acknowledged.length, 'nothing rejected was queued');
    assert.deepEqual(seqs, Array.from({ length: seqs.length }, (_, i) => i + 1), 'sequence numbers 1..N without gaps');
    // Every node committed some of them (the senders were spread).
    const segments = await queryDatabase<{ n: string }>(url, "SELECT count(*) AS n FROM queue_segments WHERE data_set_id = 'mixed'");
    assert.ok(Number(segments[0]!.n) >= 200);
  });

  test('a key revoked with the CLI is refused by every node within 5 s', async (t) => {
    const key = await pgCli(['key', 'create', '--data-set', 'mixed']);
    const other = { keyId: key.key_id, secret: key.secret };
    // The new key reaches every node (control poll).
    for (const node of nodes) {
      for (let i = 0; ; i++) {
        const res = await postSigned(node.port, node.ca, other, 'mixed', JSON.stringify(sampleEvent('mixed')));
        if (res.status === 200) break;
        assert.ok(i < 50, `new key not accepted by node ${node.port}: ${res.status}`);
        await sleep(100);
      }
    }
    const revokedAt = Date.now();
    await pgCli(['key', 'revoke', other.keyId]);
    const latencies = await Promise.all(
      nodes.map(async (node) => {
        for (;;) {
          const res = await postSigned(node.port, node.ca, other, 'mixed', JSON.stringify(sampleEvent('mixed')));
          if (res.status === 401) {
            assert.deepEqual(res.json(), { error: 'key id in X-Service-Key-Id has been revoked' });
            return Date.now() - revokedAt;
          }
          assert.ok(Date.now() - revokedAt < 5000, `node ${node.port} still accepts the revoked key after 5 s`);
          await sleep(50);
        }
      }),
    );
    assert.ok(Math.max(...latencies) < 5000, `propagation ${latencies.join(', ')} ms`);
    t.diagnostic(`revocation reached the 3 nodes after ${latencies.join(', ')} ms`);
  });

  test('rate limits hold cluster-wide: 3 nodes admit within 10% of the data set limit', async (t) => {
    // limited: 100 requests/s, bursts of at most 100/s (bucket of one second).
    const agents = nodes.map((n) => new https.Agent({ keepAlive: true, ca: n.ca, minVersion: 'TLSv1.3', maxSockets: 8 }));
    const post = (i: number) =>
      new Promise<number>((resolve, reject) => {
        const node = nodes[i % 3]!;
        const body = JSON.stringify(sampleEvent('limited'));
        const req = https.request(
          {
            host: '127.0.0.1', servername: 'localhost', port: node.port, method: 'POST', path: '/v1/events', agent: agents[i % 3],
            headers: {
              'content-type': 'application/json', accept: 'application/json', 'content-length': Buffer.byteLength(body),
              'x-service-key-id': creds.keyId, 'x-service-data-set': 'limited', 'x-service-signature': signBody(body, creds.secret),
            },
          },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    const SECONDS = 6;
    await sleep(1000 - (Date.now() % 1000) + 5);
    const start = Date.now();
    const end = start + SECONDS * 1000;
    let admitted = 0;
    let refused = 0;
    await Promise.all(
      Array.from({ length: 12 }, async (_, loop) => {
        let i = loop;
        while (Date.now() < end) {
          const status = await post(i);
          i += 12;
          if (Date.now() > end) break; // answered after the window: not counted
          if (status === 200) admitted++;
          else if (status === 429) refused++;
          else assert.fail(`unexpected status ${status}`);
        }
      }),
    );
    for (const agent of agents) agent.destroy();
    const limit = 100 * SECONDS;
    t.diagnostic(`admitted ${admitted} (limit ${limit}), refused ${refused}, in ${SECONDS} s across 3 nodes`);
    assert.ok(refused > admitted / 2, `the senders offered more than the limit (${admitted} admitted, ${refused} refused)`);
    assert.ok(
      Math.abs(admitted - limit) <= limit * 0.1,
      `admitted ${admitted} in ${SECONDS} s across 3 nodes; limit ${limit} (±10%); refused ${refused}`,
    );
  });

  test('workers share the queue; a SIGKILLed worker is taken over within 30 s; nothing skipped, nothing applied twice', async (t) => {
    const workers = [startWorker(), startWorker()];
    try {
      // Both workers hold partitions.
      for (let i = 0; ; i++) {
        const owners = await queryDatabase<{ owner: string }>(url, 'SELECT DISTINCT owner FROM consumer_leases WHERE owner IS NOT NULL');
        if (owners.length === 2) break;
        assert.ok(i < 150, 'two workers never shared the partitions');
        await sleep(200);
      }
      // Load across nodes and data sets; one worker is killed in the middle of it.
      const acknowledged: string[] = [];
      let stop = false;
      const load = Promise.all(
        Array.from({ length: 6 }, async (_, sender) => {
          for (let i = 0; !stop; i++) {
            const ds = workerDataSets[(sender * 5 + i) % workerDataSets.length]!;
            const node = nodes[(sender + i) % 3]!;
            // Re-sends of the same ids merge: ids repeat every 40 requests.
            const events = Array.from({ length: 5 }, (_, j) => sampleEvent(ds, { id: `${ds}-s${sender}-${i % 40}-${j}` }));
            const res = await postSigned(node.port, node.ca, creds, ds, JSON.stringify({ events }));
            assert.equal(res.status, 200, res.text);
            for (const e of events) acknowledged.push(`${ds}\u0000${e.id as string}`);
          }
        }),
      );
      await sleep(2000);
      const victim = workers[0]!;
      victim.kill('SIGKILL');
      await once(victim, 'exit');
      const killedAt = Date.now();
      await sleep(3000);
      stop = true;
      await load;
      // Every partition is leased by the survivor within 30 s of the kill.
      for (;;) {
        const owners = await queryDatabase<{ owner: string | null; n: string }>(url, 'SELECT owner, count(*) AS n FROM consumer_leases GROUP BY owner');
        if (owners.length === 1 && owners[0]!.owner !== null && Number(owners[0]!.n) === 16) {
          t.diagnostic(`all 16 partitions leased by the survivor ${Date.now() - killedAt} ms after the kill`);
          break;
        }
        assert.ok(Date.now() - killedAt < 30_000, `partitions not taken over within 30 s: ${JSON.stringify(owners)}`);
        await sleep(250);
      }
      // ... and the view catches up with the whole queue.
      const total = acknowledged.length;
      for (;;) {
        const lag = await pgCli(['worker', 'status']);
        if (lag.lag_records === 0 && lag.queue_last_seq > 0) break;
        assert.ok(Date.now() - killedAt < 60_000, `the survivor did not catch up: ${JSON.stringify(lag)}`);
        await sleep(250);
      }
      const expected = new Map<string, number>();
      for (const k of acknowledged) expected.set(k, (expected.get(k) ?? 0) + 1);
      const rows = await queryDatabase<{ data_set_id: string; event_id: string; merged_count: number }>(
        url,
        `SELECT data_set_id, event_id, merged_count FROM view_records WHERE data_set_id LIKE 'w%'`,
      );
      const actual = new Map(rows.map((r) => [`${r.data_set_id}\u0000${r.event_id}`, r.merged_count]));
      assert.equal(actual.size, expected.size, 'one merged record per acknowledged (data set, id): none skipped');
      for (const [k, n] of expected) assert.equal(actual.get(k), n, `merged_count of ${k.replace('\u0000', '/')}: applied exactly once per queued record`);
      const received = await queryDatabase<{ n: string }>(url, `SELECT COALESCE(SUM(n), 0) AS n FROM view_counters WHERE name = 'received' AND data_set_id LIKE 'w%'`);
      assert.equal(Number(received[0]!.n), total, 'the received counter counts every queued record once');
    } finally {
      for (const w of workers) if (w.exitCode === null && w.signalCode === null) w.kill('SIGTERM');
      await Promise.all(workers.map((w) => (w.exitCode === null && w.signalCode === null ? once(w, 'exit') : undefined)));
    }
  });

  test('a node SIGKILLed under load loses no acknowledged event', async (t) => {
    const victim = nodes[1]!;
    const acknowledged: string[] = [];
    let failures = 0;
    const load = Promise.all(
      Array.from({ length: 6 }, async (_, sender) => {
        for (let i = 0; i < 400; i++) {
          const events = Array.from({ length: 3 }, (_, j) => sampleEvent('mixed', { id: `k-s${sender}-r${i}-e${j}` }));
          try {
            const res = await postSigned(victim.port, victim.ca, creds, 'mixed', JSON.stringify({ events }), { http2: sender % 2 === 1 });
            if (res.status === 200) for (const e of events) acknowledged.push(e.id as string);
          } catch {
            failures++; // connection reset by the kill: not acknowledged
            if (victim.child.exitCode !== null || victim.child.signalCode !== null) return;
          }
        }
      }),
    );
    await sleep(1500);
    victim.child.kill('SIGKILL');
    await load;
    assert.ok(acknowledged.length > 0, 'some events were acknowledged before the kill');
    assert.ok(failures > 0, 'the kill interrupted the load');
    const { ids } = await queuedIds();
    const present = new Set(ids);
    const lost = acknowledged.filter((id) => !present.has(id));
    assert.deepEqual(lost, [], `${lost.length} of ${acknowledged.length} acknowledged events lost`);
    t.diagnostic(`${acknowledged.length} events acknowledged by the killed node, all queued`);
    // The other nodes go on serving.
    const res = await postSigned(nodes[0]!.port, nodes[0]!.ca, creds, 'mixed', JSON.stringify(sampleEvent('mixed')));
    assert.equal(res.status, 200);
  });
});

if (!TEST_DATABASE_URL) test('multi-node suite', pgOnly, () => undefined);
