/**
 * `grant add|remove`: which data sets a key may write to. Running servers pick a change up within
 * about a second (the credential cache polls the control plane's version).
 */
import type { Command } from 'commander';
import type { CliContext } from './cli-context.js';

export function registerGrantCommands(program: Command, ctx: CliContext): void {
  const grant = program.command('grant').description('authorize keys for data sets');
  grant
    .command('add <key_id> <data_set_id>')
    .description('authorize a key for a data set')
    .action((keyId: string, dataSetId: string) =>
      ctx.withControl(async (cp, g) => {
        await cp.addGrant(keyId, dataSetId);
        ctx.out(g.json ? JSON.stringify({ key_id: keyId, data_set_id: dataSetId, granted: true }) : `granted ${keyId} -> ${dataSetId}`);
      }),
    );
  grant
    .command('remove <key_id> <data_set_id>')
    .description('withdraw a key\'s authorization for a data set')
    .action((keyId: string, dataSetId: string) =>
      ctx.withControl(async (cp, g) => {
        await cp.removeGrant(keyId, dataSetId);
        ctx.out(g.json ? JSON.stringify({ key_id: keyId, data_set_id: dataSetId, granted: false }) : `removed ${keyId} -> ${dataSetId}`);
      }),
    );
}
