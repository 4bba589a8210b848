/**
 * `migrate`: applies pending schema migrations of the PostgreSQL profile (idempotent); the
 * embedded profile creates its schemas when the files are opened.
 */
import type { Command } from 'commander';
import { migrateStorage } from '../storage/open-storage.js';
import type { CliContext } from './cli-context.js';

export function registerMigrateCommand(program: Command, ctx: CliContext): void {
  program
    .command('migrate')
    .description('apply pending schema migrations to the database of --database-url (idempotent; serve and worker also do it at start)')
    .action(async () => {
      const g = ctx.globals();
      const result = await migrateStorage({ dataDir: g.dataDir, env: g.env, databaseUrl: g.databaseUrl });
      if (!result) {
        ctx.out(g.json ? JSON.stringify({ profile: 'sqlite', applied: [] }) : 'embedded SQLite: nothing to migrate (schemas are created when the files are opened)');
        return;
      }
      if (g.json) return void ctx.out(JSON.stringify({ profile: 'postgres', schema: result.schema, applied: result.applied, current: result.current }));
      ctx.out(result.applied.length > 0
        ? `schema ${result.schema}: applied migration(s) ${result.applied.join(', ')}; now at version ${result.current}`
        : `schema ${result.schema}: up to date at version ${result.current}`);
    });
}
