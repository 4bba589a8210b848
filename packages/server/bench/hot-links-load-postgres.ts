/**
 * What a PostgreSQL worker's full load of one data set's hot links costs (merged-view/postgres-hot-links.ts):
 * the first batch of a data set, after a takeover of its partition, or after an erasure of its links.
 * Fills a fresh database with N links of one data set (SHA-256 email identifiers, as the workload's),
 * then runs, three times, one batch transaction of a store with hot links that asks about one
 * identifier, which loads them all through the cursor; prints per load the wall time, the process's
 * CPU, µs per link, and the RSS before and after (the first load includes the heap's growth).
 *
 *   ECAPI_TEST_DATABASE_URL=$(scripts/pg-test-cluster.sh start /tmp/pg-bench) \
 *     node [--max-semi-space-size=8] packages/server/dist/bench/hot-links-load-postgres.js [links=1000000]
 */
import { PostgresViewStore } from '../src/merged-view/postgres-view-store.js';
import { migratedPool } from '../test/helpers/postgres.js';

const LINKS = Number(process.argv[2] ?? 1_000_000);
const pool = await migratedPool('hot_links_load');
try {
  await pool.query(
    "INSERT INTO identity_identifiers (data_set_id, identifier, identity_key) SELECT 'shop', 'email:' || encode(sha256(i::text::bytea), 'hex'), 'ik_' || (i % 300000 + 1) FROM generate_series(1, $1) AS i",
    [LINKS],
  );
  await pool.query('VACUUM ANALYZE identity_identifiers');
  const mb = (bytes: number) => Math.round(bytes / 1e6);
  for (let round = 1; round <= 3; round++) {
    const store = new PostgresViewStore(pool).withHotLinks(Math.max(LINKS, 2_000_000));
    const rssBefore = process.memoryUsage().rss;
    const cpu = process.cpuUsage();
    const start = performance.now();
    await store.transaction(async (tx) => {
      await tx.offset('merged-view/p01');
      await tx.loadIdentifierLinks([{ dataSetId: 'shop', identifier: 'email:00' }]);
    });
    const ms = performance.now() - start;
    const used = process.cpuUsage(cpu);
    process.stdout.write(
      `${JSON.stringify({
        bench: 'hot-links-load-postgres',
        round,
        links: store.hotStats()!.links,
        ms: Math.round(ms),
        cpu_ms: Math.round((used.user + used.system) / 1000),
        us_per_link: +((ms * 1000) / LINKS).toFixed(2),
        rss_mb_before: mb(rssBefore),
        rss_mb_after: mb(process.memoryUsage().rss),
        node: process.version,
      })}\n`,
    );
  }
} finally {
  await pool.end();
}
