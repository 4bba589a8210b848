/**
 * Black-box durability: every event answered 200/207 is in the queue; a queue that cannot commit
 * answers 500 `ingest backend unavailable`, readiness turns false, and it recovers by itself.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { blockQueueCommits, exportQueue, provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { postSigned, sampleEvent } from '../helpers/https-client.js';

let dataDir: string;
let server: ServerProcess;
let creds: { keyId: string; secret: string };

before(async () => {
  dataDir = tempDataDir();
  creds = await provision(dataDir, ['durable']);
  server = await startServer({ dataDir });
});
after(async () => {
  await server.stop();
});

test('every event acknowledged under concurrent load is found by queue export, exactly once', async () => {
  const acknowledged: string[] = [];
  const senders = Array.from({ length: 8 }, async (_, sender) => {
    for (let i = 0; i < 40; i++) {
      const size = 1 + ((sender + i) % 7);
      const events = Array.from({ length: size }, (_, j) => sampleEvent('durable', { id: `s${sender}-r${i}-e${j}` }));
      if (i % 5 === 0) delete events[0]!.timestamp; // some 207s
      const res = await postSigned(server.port, server.ca, creds, 'durable', JSON.stringify({ events }), { http2: sender % 2 === 0 });
      assert.ok(res.status === 200 || res.status === 207 || (res.status === 400 && size === 1), `${res.status} ${res.text}`);
      const rejected = new Set(((res.json().errors ?? []) as { index: number }[]).map((e) => e.index));
      events.forEach((e, j) => {
        if (!rejected.has(j) && res.status !== 400) acknowledged.push(e.id as string);
      });
    }
  });
  await Promise.all(senders);
  const records = await exportQueue(dataDir);
  const counts = new Map<string, number>();
  for (const r of records) counts.set(r.event.id, (counts.get(r.event.id) ?? 0) + 1);
  for (const id of acknowledged) assert.equal(counts.get(id), 1, `acknowledged event ${id} queued exactly once`);
  assert.equal(records.filter((r) => r.data_set_id === 'durable').length, acknowledged.length, 'nothing rejected was queued');
  const seqs = records.map((r) => r.seq);
  assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), 'sequence numbers ascend');
  assert.equal(new Set(seqs).size, seqs.length, 'sequence numbers are unique');
});

async function readyzUntil(status: number): Promise<{ ready: boolean; checks: { queue_writable: boolean } }> {
  for (let i = 0; ; i++) {
    const res = await fetch(`http://127.0.0.1:${server.adminPort}/readyz`);
    if (res.status === status || i === 20) {
      assert.equal(res.status, status);
      return (await res.json()) as { ready: boolean; checks: { queue_writable: boolean } };
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

test('a queue that cannot commit answers 500, readiness turns false, and recovery needs no restart', async () => {
  // Another process holds the queue's write lock longer than the writer's busy timeout: a real,
  // external fault of the database, not a simulated one.
  const release = await blockQueueCommits(dataDir);
  const event = sampleEvent('durable', { id: 'during-outage' });
  try {
    const res = await postSigned(server.port, server.ca, creds, 'durable', JSON.stringify(event));
    assert.equal(res.status, 500);
    assert.deepEqual(res.json(), { error: 'ingest backend unavailable' });
    // With several serving processes the primary learns of the failure over IPC: allow it a moment.
    const ready = await readyzUntil(503);
    assert.equal(ready.checks.queue_writable, false);
    const metrics = await (await fetch(`http://127.0.0.1:${server.adminPort}/metrics`)).text();
    assert.match(metrics, /ecapi_queue_commit_failures_total [1-9]/);
    assert.match(metrics, /ecapi_queue_writable 0/);
  } finally {
    await release();
  }
  assert.ok(!(await exportQueue(dataDir)).some((r) => r.event.id === 'during-outage'), 'a 500 event is not queued');
  // The retry the spec allows succeeds once the fault is gone.
  const retry = await postSigned(server.port, server.ca, creds, 'durable', JSON.stringify(event));
  assert.equal(retry.status, 200);
  assert.equal((await readyzUntil(200)).ready, true);
  assert.equal((await exportQueue(dataDir)).filter((r) => r.event.id === 'during-outage').length, 1);
});

test('a failing queue is logged at error level once per change of state, not once per 500', { timeout: 150_000 }, async () => {
  const dir = tempDataDir();
  const own = await provision(dir, ['logged']);
  const single = await startServer({ dataDir: dir, args: ['--workers', '1', '--no-worker'] });
  const lines = (from: number) =>
    single.output().slice(from).split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { level: number; msg: string; queue_error?: string; failed_requests?: number });
  const waitReady = async () => {
    for (let i = 0; i < 100; i++) {
      if ((await fetch(`http://127.0.0.1:${single.adminPort}/readyz`)).status === 200) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.fail('readiness did not return');
  };
  try {
    for (let outage = 1; outage <= 2; outage++) {
      const from = single.output().length;
      const release = await blockQueueCommits(dir);
      try {
        for (let i = 0; i < 3; i++) {
          const res = await postSigned(single.port, single.ca, own, 'logged', JSON.stringify(sampleEvent('logged')));
          assert.equal(res.status, 500);
        }
      } finally {
        await release();
      }
      await waitReady();
      // The log is flushed at least every 200 ms.
      await new Promise((r) => setTimeout(r, 400));
      const logged = lines(from);
      const failing = logged.filter((l) => l.msg.startsWith('queue storage failing'));
      const recovered = logged.filter((l) => l.msg === 'queue storage recovered');
      assert.equal(failing.length, 1, `outage ${outage}: one failing line for three 500s`);
      assert.equal(failing[0]!.level, 50, 'at error level');
      assert.ok(failing[0]!.queue_error && failing[0]!.queue_error.length > 0, 'with the storage error');
      assert.equal(recovered.length, 1, `outage ${outage}: one recovery line`);
      assert.equal(recovered[0]!.failed_requests, 3);
      assert.equal(logged.filter((l) => l.level >= 50).length, 1, 'no other error lines (the 500s stay request lines)');
    }
  } finally {
    assert.equal(await single.stop(), 0);
  }
});
