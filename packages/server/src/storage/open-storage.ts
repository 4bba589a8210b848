/**
 * The only place that chooses the storage profile: with a database URL (`--database-url`, env
 * ECAPI_DATABASE_URL) everything lives in PostgreSQL; without one, in the embedded SQLite files of
 * the data dir, exactly as before.
 */
import type { Environment } from '../config.js';
import { migrate, type MigrationResult } from '../postgres/database.js';
import { PostgresStorage } from './postgres-storage.js';
import { SqliteStorage } from './sqlite-storage.js';
import type { Storage } from './storage.js';

export interface StorageOptions {
  readonly dataDir: string;
  readonly env: Environment;
  /** postgres://… selects the PostgreSQL profile. */
  readonly databaseUrl?: string | undefined;
  /** Apply pending migrations first (default true; `serve` and `worker` rely on it). */
  readonly migrate?: boolean;
  /** Connections of the main pool (PostgreSQL). */
  readonly poolSize?: number;
  /** --master-key-file (ECAPI_MASTER_KEY_FILE): the master key from a mounted secret. */
  readonly masterKeyFile?: string | undefined;
}

export function isDatabaseUrl(url: string | undefined): url is string {
  return url !== undefined && url !== '' && /^postgres(ql)?:\/\//.test(url);
}

export function validateDatabaseUrl(url: string | undefined): void {
  if (url !== undefined && url !== '' && !isDatabaseUrl(url)) {
    throw new Error('invalid --database-url: expected postgres://user[:password]@host[:port]/database');
  }
}

export async function openStorage(options: StorageOptions): Promise<Storage> {
  validateDatabaseUrl(options.databaseUrl);
  if (!isDatabaseUrl(options.databaseUrl)) {
    const storage = new SqliteStorage(options.dataDir, options.env, { masterKeyFile: options.masterKeyFile });
    if (options.migrate ?? true) {
      try {
        await storage.prepareFiles();
      } catch (error) {
        await storage.close(); // what it opened before the failure (a locked file: the worker tries again)
        throw error;
      }
    }
    return storage;
  }
  if (options.migrate ?? true) await migrate(options.databaseUrl, options.env);
  return new PostgresStorage(options.databaseUrl, options.dataDir, options.env, {
    poolSize: options.poolSize,
    masterKeyFile: options.masterKeyFile,
  });
}

/** `ecapi-ingest migrate`: applies pending migrations; the embedded profile creates its schema on open. */
export async function migrateStorage(options: StorageOptions): Promise<MigrationResult | null> {
  validateDatabaseUrl(options.databaseUrl);
  if (!isDatabaseUrl(options.databaseUrl)) return null;
  return migrate(options.databaseUrl, options.env);
}
