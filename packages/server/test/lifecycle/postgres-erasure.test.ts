/**
 * What can be tested of erasure on the PostgreSQL profile (issue 29; docs/SECURITY.md says what is
 * promised there): once `identities forget` / `events delete` report done, no row of the schema
 * holds the digest or the event ids any more (every table, as text), and the touched tables were
 * VACUUMed by the worker (their dead row versions left the visible space), which autovacuum alone
 * would do only later. The bytes in the server's data files until reused, its WAL, archives and
 * backups are outside what a test here can see. Runs with ECAPI_TEST_PROFILE=postgres (.ci/run).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { cliJson, consumerCaughtUp, databaseUrlFor, provision, startServer, tempDataDir, TEST_PROFILE } from '../helpers/server-process.js';
import { postSigned } from '../helpers/https-client.js';
import { sha } from '../helpers/event-generator.js';
import { waitFor } from '../helpers/fault-tools.js';
import { queryDatabase } from '../helpers/postgres.js';
import { purchaseEvent } from '../helpers/purchase-event.js';

const skip = TEST_PROFILE === 'postgres' ? false : 'PostgreSQL profile only (ECAPI_TEST_PROFILE=postgres; .ci/run runs it)';
const SCHEMA = 'ecapi_production';
const TOUCHED = ['view_records', 'identity_nodes', 'identity_identifiers', 'queue_segments', 'deletion_requests'];

const event = (id: string, email: string, extra: Record<string, unknown> = {}, phone?: string) =>
  purchaseEvent('shop', id, { email_address: [email], ...(phone ? { phone_numbers: [phone] } : {}) }, extra);

/**
 * A property whose KEY is an email address: the policy's PII scan (redact) rewrites the value, and the
 * event's meta in queue_segments.metas names the path, key and all (`properties["…"]`).
 */
const emailKeyed = (key: string) => ({ properties: { [key]: `write to ${key}` } });

/** VACUUMs so far of each touched table (partitions summed under their parent's name). */
async function vacuums(url: string): Promise<Record<string, number>> {
  const rows = await queryDatabase<{ relname: string; n: string }>(
    url,
    `SELECT relname, vacuum_count AS n FROM pg_stat_user_tables WHERE schemaname = $1`,
    [SCHEMA],
  );
  const out: Record<string, number> = {};
  for (const t of TOUCHED) out[t] = rows.filter((r) => r.relname === t || r.relname.startsWith(`${t}_`)).reduce((n, r) => n + Number(r.n), 0);
  return out;
}

/** Every row of every table of the schema as text, searched for `needle`. */
async function tablesHolding(url: string, needle: string): Promise<string[]> {
  const tables = await queryDatabase<{ table_name: string }>(url, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 AND table_type = 'BASE TABLE'`, [SCHEMA]);
  const found: string[] = [];
  for (const { table_name } of tables) {
    const rows = await queryDatabase(url, `SELECT 1 FROM ${SCHEMA}."${table_name}" t WHERE position($1 in t::text) > 0 LIMIT 1`, [needle]);
    if (rows.length > 0) found.push(table_name);
  }
  return found;
}

test('PostgreSQL: once done, no row of the schema holds the digest or the event ids, and the touched tables were VACUUMed', { skip, timeout: 60_000 }, async () => {
  const dataDir = tempDataDir('ecapi-pg-erasure-');
  const creds = await provision(dataDir, ['shop']);
  const url = (await databaseUrlFor(dataDir))!;
  const server = await startServer({ dataDir, args: ['--workers', '1'] });
  const rnd = randomBytes(6).toString('hex');
  const A = sha(`pg-erase-${rnd}@example.com`);
  const ids = Array.from({ length: 30 }, (_, i) => `pg-gone-${i}-${rnd}`);
  const single = `pg-single-${rnd}`;
  // Shorter than the 40 characters a path shows of a key; no substring of the ids.
  const forgottenKey = `kf${rnd}@example.com`;
  const deletedKey = `kd${rnd}@example.com`;
  // The deleted event's identity stays (`keep` shares its email); its phone, only it carried, goes.
  const Q = sha(`+1666${rnd}`);
  try {
    const res = await postSigned(server.port, server.ca, creds, 'shop', JSON.stringify({
        events: [
          ...ids.map((id, i) => event(id, A, i === 7 ? emailKeyed(forgottenKey) : {})),
          event(single, sha(`y-${rnd}`), emailKeyed(deletedKey), Q),
          event(`keep-${rnd}`, sha(`y-${rnd}`)),
        ],
      }));
    assert.equal(res.status, 200, res.text);
    await consumerCaughtUp(dataDir, 30_000);
    assert.ok((await tablesHolding(url, A)).length > 0, 'the search finds the digest before');
    const before = await vacuums(url);

    const forgot = await cliJson(dataDir, ['identities', 'forget', 'shop', '--identifier', `email:${A}`]);
    assert.equal(forgot.state, 'done');
    assert.equal(forgot.result.view_records, ids.length);
    assert.equal(forgot.result.queue_events, ids.length);
    const deleted = await cliJson(dataDir, ['events', 'delete', 'shop', single]);
    assert.equal(deleted.state, 'done');
    assert.deepEqual([deleted.result.view_records, deleted.result.identities, deleted.result.identifier_links], [1, 0, 1], 'the record and the link of its phone');

    for (const needle of [A, single, ids[0]!, ids[29]!, forgottenKey, deletedKey, Q]) assert.deepEqual(await tablesHolding(url, needle), [], `no row holds ${needle === A ? 'the digest' : needle}`);
    assert.ok((await tablesHolding(url, `keep-${rnd}`)).length > 0, 'others stay');
    // The statistics collector reports VACUUMs with a short delay.
    await waitFor('the VACUUMs to show', async () => {
      const after = await vacuums(url);
      return TOUCHED.every((t) => after[t]! > before[t]!);
    }, 15_000, 250).catch(async (error: Error) => {
      throw new Error(`${error.message}: before ${JSON.stringify(before)}, after ${JSON.stringify(await vacuums(url))}`);
    });
  } finally {
    assert.equal(await server.stop(), 0);
  }
});
