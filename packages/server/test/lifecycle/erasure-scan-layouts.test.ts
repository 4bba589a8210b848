/**
 * Erasure as a property of the files (issue 29) where erasure-scan.test.ts does not look: the
 * sharded layout (`worker --view-layout sharded`: record shards view-s<k>.db and identity parts,
 * through `serve` with ECAPI_VIEW_LAYOUT) beside the data-set partitions, for `identities forget`
 * (identities united, re-sends, the body log), `events delete` (a phone only it carried) and
 * retention; lifecycle.db with many requests pending at once; and, on both layouts and both
 * profiles, `events delete` of a record whose scalar identifier (`customer_identifier`, `ifa`) a
 * merged re-send replaced while its identity keeps another record. Black-box against a real
 * `serve`, scanned by test/helpers/erasure-scan.ts (every byte of every file under the data dir, by
 * no name) and in the service's own output.
 *
 * Anything left anywhere fails: live or freed cells, the unallocated space of b-tree pages (where
 * a page SQLite rebuilt in a split or merge keeps old copies of cells that secure_delete does not
 * zero: fs/page-gap-scrub.ts clears them; the sharded forget below left some there before it), other
 * pages, a -wal, the body log, the service's output. Where a byte is left is named (page, page type,
 * region) by erasure-scan.ts `locate`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { cli, cliJson, consumerCaughtUp, provision, startServer, tempDataDir, TEST_PROFILE, type ServerProcess } from '../helpers/server-process.js';
import { postSigned } from '../helpers/https-client.js';
import { sha } from '../helpers/event-generator.js';
import { waitFor } from '../helpers/fault-tools.js';
import { digestNeedles, locate, residue, textNeedle, untilRetentionDeleted, type Needle } from '../helpers/erasure-scan.js';
import { purchaseEvent as event } from '../helpers/purchase-event.js';

const skip = TEST_PROFILE === 'sqlite' ? false : 'embedded profile only: on PostgreSQL the bytes live in the database server (postgres-erasure.test.ts)';

const SHARDED = { ECAPI_VIEW_LAYOUT: 'sharded', ECAPI_VIEW_PARTITIONS: '2' };
/** Named, not inherited: .ci/run runs the lifecycle suites again with ECAPI_VIEW_LAYOUT=sharded. */
const DATA_SETS = { ECAPI_VIEW_LAYOUT: 'data-sets', ECAPI_VIEW_PARTITIONS: '2' };
/** As erasure-scan.test.ts: the scrub after retention every 2 s (`--old-copies-every`), the bound 2 s longer. */
const OLD_COPIES_EVERY = '2s';
const RETENTION_BOUND_MS = 10_000 + 2_000;

const caughtUp = (dataDir: string) => consumerCaughtUp(dataDir, 30_000);


/** Nothing of the needles in any file (in any region of any page) nor in the service's output. */
function assertNoneLeft(dataDir: string, needles: readonly Needle[], server?: ServerProcess): void {
  assert.deepEqual([...locate(dataDir, needles), ...(server ? inOutput(server, needles) : [])], [], 'no byte left in any page, WAL, the body log or the logs');
}

/** Where the needles are in the service's output (its logs), as "output: label" lines. */
function inOutput(server: ServerProcess, needles: readonly Needle[]): string[] {
  const out = Buffer.from(server.output(), 'utf8');
  return needles.filter((n) => out.includes(n.bytes)).map((n) => `output: ${n.label}`);
}

async function layoutOf(dataDir: string): Promise<string> {
  return String((await cliJson(dataDir, ['worker', 'status'])).view_layout);
}

for (const layout of ['partitions', 'sharded'] as const) test(`${layout} layout: forget (identities united, re-sends, body log) and events delete (a phone only it carried): once done, no byte left in any file`, { skip, timeout: 120_000 }, async () => {
  const dataDir = tempDataDir('ecapi-erasure-sharded-');
  const creds = await provision(dataDir, ['shop']);
  const server = await startServer({ dataDir, args: ['--workers', '1'], extraEnv: layout === 'sharded' ? SHARDED : DATA_SETS });
  const rnd = randomBytes(8).toString('hex');
  const A = sha(`sh-erase-me-${rnd}@example.com`);
  const P = sha(`+1555${rnd}`); // first an identity of its own, then united with A's
  const Q = sha(`+1666${rnd}`); // the deleted event's phone alone
  const gone = (i: number | string) => `sh-gone-${i}-${rnd}`;
  const deletedId = `sh-deleted-${rnd}`;
  const keepY = sha(`keep-y1-${rnd}`);
  const goneIds: string[] = [];
  try {
    const post = async (body: unknown) => {
      const res = await postSigned(server.port, server.ca, creds, 'shop', JSON.stringify(body));
      assert.equal(res.status, 200, res.text);
    };
    const other = (s: string) => event('shop', `keep-${rnd}-${s}`, { email_address: [sha(`keep-${s}-${rnd}`)] });
    await post(event('shop', gone(0), { email_address: [A] }));
    await post(event('shop', gone('p'), { phone_numbers: [P] }));
    await post({ events: [event('shop', gone(1), { email_address: [A], phone_numbers: [P] }), other('x1')] });
    await post(event('shop', gone(0), { email_address: [A] })); // a re-send: its record rewritten
    const big = Array.from({ length: 200 }, (_, i) => (i % 4 === 0 ? event('shop', gone(`big-${i}`), { email_address: [A] }) : other(`big-${i}`)));
    await post({ events: big }); // > 32 KiB: the body log
    for (let b = 0; b < 20; b++) {
      await post({ events: Array.from({ length: 100 }, (_, i) => (i === 50 ? event('shop', gone(`b${b}`), { email_address: [A] }) : other(`${b}-${i}`))) });
    }
    await post({ events: [event('shop', deletedId, { email_address: [keepY], phone_numbers: [Q] }), event('shop', `keep-${rnd}-y1`, { email_address: [keepY] })] });
    for (const id of [gone(0), gone('p'), gone(1), ...big.map((e) => e.id).filter((id) => id.startsWith('sh-gone-')), ...Array.from({ length: 20 }, (_, b) => gone(`b${b}`))]) {
      if (!goneIds.includes(id)) goneIds.push(id);
    }
    await caughtUp(dataDir);
    assert.equal(await layoutOf(dataDir), layout === 'sharded' ? 'sharded' : 'data-sets');
    const needles: Needle[] = [
      ...digestNeedles('email A', A),
      ...digestNeedles('phone P', P),
      ...digestNeedles('phone Q', Q),
      textNeedle('deleted event id', deletedId),
      ...goneIds.map((id) => textNeedle(`event id ${id}`, id)),
    ];
    const before = residue(dataDir, needles);
    if (layout === 'sharded') assert.ok(before.some((l) => /view-s\d+\.db/.test(l)), `the record shards hold them before: ${before.join(', ')}`);

    const forgot = await cliJson(dataDir, ['identities', 'forget', 'shop', '--identifier', `email:${A}`]);
    assert.equal(forgot.state, 'done');
    assert.equal(forgot.result.view_records, goneIds.length);
    const deleted = await cliJson(dataDir, ['events', 'delete', 'shop', deletedId]);
    assert.equal(deleted.state, 'done');
    assert.equal(deleted.result.view_records, 1);
    assert.equal(deleted.result.identifier_links, 1);
    assert.notEqual((await cli(dataDir, ['--json', 'identities', 'get', 'shop', '--identifier', `phone:${Q}`])).code, 0, 'the phone no longer resolves');

    assertNoneLeft(dataDir, needles, server);
    for (let b = 0; b < 5; b++) await post({ events: Array.from({ length: 100 }, (_, i) => other(`after-${b}-${i}`)) });
    await caughtUp(dataDir);
    assertNoneLeft(dataDir, needles);
  } finally {
    assert.equal(await server.stop(), 0);
  }
  assertNoneLeft(dataDir, [...digestNeedles('email A', A), ...digestNeedles('phone Q', Q), textNeedle('deleted', deletedId), ...goneIds.map((id) => textNeedle(id, id))]); // nor after a clean stop
  assert.equal((await cli(dataDir, ['--json', 'events', 'get', 'shop', `keep-${rnd}-x1`])).code, 0);
});

test('sharded layout: view and queue retention: within the bound after a record was deleted, none of its bytes is left in any file', { skip, timeout: 90_000 }, async () => {
  const dataDir = tempDataDir('ecapi-erasure-sharded-');
  const creds = await provision(dataDir, ['old', 'live']);
  await cliJson(dataDir, ['data-set', 'policy', 'old', '--merge-window', '1s', '--max-age', '3s', '--view-retention', '4s']);
  const server = await startServer({
    dataDir,
    args: ['--workers', '1'],
    extraEnv: { ...SHARDED, ECAPI_VIEW_RETENTION_EVERY: '500ms', ECAPI_QUEUE_RETENTION: '2s', ECAPI_QUEUE_RETENTION_EVERY: '500ms', ECAPI_OLD_COPIES_EVERY: OLD_COPIES_EVERY },
  });
  const rnd = randomBytes(8).toString('hex');
  const R = sha(`sh-expire-me-${rnd}@example.com`);
  const ids = Array.from({ length: 50 }, (_, i) => `sh-expired-${i}-${rnd}`);
  const needles = [...digestNeedles('email R', R), ...ids.map((id) => textNeedle(id, id))];
  let sending = true;
  let sender: Promise<void> | null = null;
  try {
    const post = async (dataSetId: string, body: unknown) => {
      const res = await postSigned(server.port, server.ca, creds, dataSetId, JSON.stringify(body));
      assert.equal(res.status, 200, res.text);
    };
    await post('old', { events: ids.map((id) => event('old', id, { email_address: [R] })) });
    sender = (async () => {
      for (let n = 0; sending; n++) {
        await post('live', { events: Array.from({ length: 50 }, (_, i) => event('live', `live-${n}-${i}`, { email_address: [sha(`live-${n}-${i}`)] })) });
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    await caughtUp(dataDir);
    assert.match(await layoutOf(dataDir), /sharded/);
    assert.notDeepEqual(residue(dataDir, needles), []);
    await untilRetentionDeleted(dataDir, 'old', ids[0]!);
    await waitFor(`no byte left within ${RETENTION_BOUND_MS} ms`, () => locate(dataDir, needles).length === 0, RETENTION_BOUND_MS, 250).catch((error: Error) => {
      throw new Error(`${error.message}; left: ${locate(dataDir, needles).join(', ')}`);
    });
    assertNoneLeft(dataDir, needles);
  } finally {
    sending = false;
    await sender;
    assert.equal(await server.stop(), 0);
  }
  assertNoneLeft(dataDir, needles);
});

for (const layout of ['partitions', 'sharded'] as const) {
  // Both profiles: on PostgreSQL the link is checked through `identities get` (its bytes are the server's).
  test(`${layout} layout: events delete of a record whose customer_identifier and ifa a merged re-send replaced (its identity keeps another record): no byte of the older values left`, { timeout: 90_000 }, async () => {
    const dataDir = tempDataDir('ecapi-erasure-scalar-');
    const creds = await provision(dataDir, ['shop']);
    const server = await startServer({ dataDir, args: ['--workers', '1'], extraEnv: layout === 'sharded' ? SHARDED : DATA_SETS });
    const rnd = randomBytes(8).toString('hex');
    const E = sha(`shared-${rnd}@example.com`); // the identity's email, which another record keeps
    const C1 = sha(`cid-1-${rnd}`); // the deleted event's first customer id, replaced by C2
    const C2 = sha(`cid-2-${rnd}`);
    const I1 = randomUUID(); // its first device id, replaced by I2
    const I2 = randomUUID();
    const id = `scalar-${rnd}`;
    const needles: Needle[] = [...digestNeedles('customer id C1 (replaced)', C1), ...digestNeedles('customer id C2', C2), textNeedle('ifa I1 (replaced)', I1), textNeedle('ifa I2', I2), textNeedle('event id', id)];
    const rawUuid = (u: string) => ({ label: `${u} (raw)`, bytes: Buffer.from(u.replace(/-/g, ''), 'hex') });
    needles.push(rawUuid(I1), rawUuid(I2));
    try {
      const post = async (body: unknown) => {
        const res = await postSigned(server.port, server.ca, creds, 'shop', JSON.stringify(body));
        assert.equal(res.status, 200, res.text);
      };
      await post(event('shop', `keeper-${rnd}`, { email_address: [E] }));
      await post(event('shop', id, { email_address: [E], customer_identifier: C1, ifa: I1 }));
      await caughtUp(dataDir);
      await post(event('shop', id, { email_address: [E], customer_identifier: C2, ifa: I2 })); // merged: the scalars replaced
      for (let b = 0; b < 3; b++) await post({ events: Array.from({ length: 100 }, (_, i) => event('shop', `o-${b}-${i}-${rnd}`, { email_address: [sha(`o-${b}-${i}-${rnd}`)] })) });
      await caughtUp(dataDir);
      if (layout === 'sharded') assert.match(await layoutOf(dataDir), /sharded/);
      const merged = await cliJson(dataDir, ['events', 'get', 'shop', id]);
      assert.equal(JSON.stringify(merged).includes(C2), true, 'the record holds the newer customer id');
      assert.equal(JSON.stringify(merged).includes(C1), false, 'and not the older one');
      if (TEST_PROFILE === 'sqlite') assert.notDeepEqual(residue(dataDir, needles), []);

      const deleted = await cliJson(dataDir, ['events', 'delete', 'shop', id]);
      assert.equal(deleted.state, 'done');
      assert.equal(deleted.result.view_records, 1);
      assert.equal(deleted.result.identities, 0, 'the identity stays: keeper carries E');
      const resolves = async (identifier: string) => (await cli(dataDir, ['--json', 'identities', 'get', 'shop', '--identifier', identifier])).code === 0;
      const stillResolving = [];
      for (const identifier of [`cid:${C1}`, `cid:${C2}`, `ifa:${I1}`, `ifa:${I2}`]) if (await resolves(identifier)) stillResolving.push(identifier);
      assert.deepEqual(stillResolving, [], 'none of the deleted event\'s identifiers resolves, the replaced older values included');
      assert.equal(deleted.result.identifier_links, 4, 'C1, C2, I1 and I2: the record\'s own and the values its re-send replaced');
      if (TEST_PROFILE === 'sqlite') assertNoneLeft(dataDir, needles, server);
      else assert.deepEqual(inOutput(server, needles), [], 'nothing in the service\'s output');
      assert.equal(await resolves(`email:${E}`), true, "the keeper's email still resolves");
    } finally {
      assert.equal(await server.stop(), 0);
    }
  });
}

test('lifecycle.db: many requests pending at once (rows rewritten while others still hold their targets): once all are done, no target is left in any file', { skip, timeout: 120_000 }, async () => {
  const dataDir = tempDataDir('ecapi-erasure-lifecycle-');
  const creds = await provision(dataDir, ['shop']);
  const server = await startServer({ dataDir, args: ['--workers', '1'] });
  const rnd = randomBytes(8).toString('hex');
  const ids = Array.from({ length: 60 }, (_, i) => `lc-target-${i}-${rnd}`);
  const emails = Array.from({ length: 60 }, (_, i) => sha(`lc-target-${i}-${rnd}@example.com`));
  const needles: Needle[] = [...ids.map((id) => textNeedle(id, id)), ...emails.flatMap((e, i) => digestNeedles(`email ${i}`, e))];
  try {
    const res = await postSigned(server.port, server.ca, creds, 'shop', JSON.stringify(event('shop', `lc-other-${rnd}`, { email_address: [sha(`lc-other-${rnd}`)] })));
    assert.equal(res.status, 200, res.text);
    await caughtUp(dataDir);
    for (let i = 0; i < ids.length; i++) {
      await cli(dataDir, ['--json', 'events', 'delete', 'shop', ids[i]!, '--no-wait']);
      await cli(dataDir, ['--json', 'identities', 'forget', 'shop', '--identifier', `email:${emails[i]}`, '--no-wait']);
    }
    await waitFor('every request to be done', async () => ((await cliJson(dataDir, ['deletions', 'shop'])) as { state: string }[]).every((r) => r.state === 'done'), 60_000, 250);
    assertNoneLeft(dataDir, needles, server);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});
