/** The ControlPlane contract against the SQLite store (control.db of an environment). */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { ControlPlaneService } from '../../src/control/control-plane-service.js';
import { SqliteControlStore } from '../../src/control/sqlite-control-store.js';
import { tempDataDir } from '../helpers/server-process.js';
import { controlPlaneContract } from './control-plane-contract.js';

controlPlaneContract('SQLite', {
  async create() {
    const dir = tempDataDir();
    const file = join(dir, 'control.db');
    const raw = () => new Database(file);
    const opened: ControlPlaneService[] = [];
    return {
      open(keys, now) {
        const cp = new ControlPlaneService(new SqliteControlStore(file), keys, now);
        opened.push(cp);
        return cp;
      },
      // Every file of the directory (the database, its WAL), byte for byte.
      async dumpSigningKeys() {
        return readdirSync(dir).map((name) => readFileSync(join(dir, name)).toString('latin1')).join('\n');
      },
      async storedFingerprint() {
        const db = raw();
        try {
          return (db.prepare('SELECT master_key_fingerprint AS f FROM control_meta').get() as { f: string | null }).f;
        } finally {
          db.close();
        }
      },
      async clearFingerprint() {
        const db = raw();
        db.prepare('UPDATE control_meta SET master_key_fingerprint = NULL').run();
        db.close();
      },
      async writePolicyRow(id, json) {
        const db = raw();
        db.prepare('UPDATE data_sets SET policy = ? WHERE id = ?').run(json, id);
        db.close();
      },
      name: /does not match the control plane .*control\.db/,
      async dispose() {
        for (const cp of opened) await cp.close().catch(() => undefined);
      },
    };
  },
});
