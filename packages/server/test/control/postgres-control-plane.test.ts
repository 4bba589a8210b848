/** The ControlPlane contract against the PostgreSQL store (skipped without ECAPI_TEST_DATABASE_URL). */
import { ControlPlaneService } from '../../src/control/control-plane-service.js';
import { PostgresControlStore } from '../../src/control/postgres-control-store.js';
import { createPool, migrate } from '../../src/postgres/database.js';
import { freshDatabase, pgOnly, queryDatabase } from '../helpers/postgres.js';
import { controlPlaneContract } from './control-plane-contract.js';

controlPlaneContract(
  'PostgreSQL',
  {
    async create() {
      const url = await freshDatabase('control');
      await migrate(url, 'production');
      const pool = createPool(url, 'production');
      const name = 'PostgreSQL schema ecapi_production';
      return {
        open: (keys, now) => new ControlPlaneService(new PostgresControlStore(pool, { name }), keys, now),
        async dumpSigningKeys() {
          return JSON.stringify(
            await queryDatabase(url, "SELECT encode(secret_sealed, 'escape') AS s, encode(previous_secret_sealed, 'escape') AS p FROM signing_keys"),
          );
        },
        async storedFingerprint() {
          return (await queryDatabase<{ f: string | null }>(url, 'SELECT master_key_fingerprint AS f FROM control_meta'))[0]!.f;
        },
        async clearFingerprint() {
          await queryDatabase(url, 'UPDATE control_meta SET master_key_fingerprint = NULL');
        },
        async writePolicyRow(id, json) {
          await queryDatabase(url, 'UPDATE data_sets SET policy = $1 WHERE id = $2', [json, id]);
        },
        name: /does not match the control plane \(PostgreSQL schema ecapi_production\)/,
        dispose: () => pool.end(),
      };
    },
  },
  pgOnly,
);
