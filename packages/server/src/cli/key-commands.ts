/**
 * `key create|rotate|revoke|list`: signing keys. A secret is printed once, when issued or rotated;
 * listings never show one.
 */
import type { Command } from 'commander';
import type { KeyRecord } from '../control/control-plane.js';
import { MAX_ROTATION_GRACE_MS } from '../control/control-plane-service.js';
import { isoOrNull, parseDurationMs } from '../control/duration.js';
import type { CliContext } from './cli-context.js';

const iso = isoOrNull;

function keyJson(record: KeyRecord) {
  return {
    key_id: record.keyId,
    data_sets: record.dataSets,
    created_at: iso(record.createdAt),
    rotated_at: iso(record.rotatedAt),
    previous_secret_valid_until: iso(record.previousSecretValidUntil),
    revoked_at: iso(record.revokedAt),
    status: record.revokedAt !== null ? 'revoked' : 'active',
  };
}

export function registerKeyCommands(program: Command, ctx: CliContext): void {
  const key = program.command('key').description('manage signing keys (principals)');
  key
    .command('create')
    .description('issue a key id and secret authorized for one or more data sets')
    .requiredOption('--data-set <id...>', 'data set(s) the key may write to (required, repeatable)')
    .action((opts: { dataSet: string[] }) =>
      ctx.withControl(async (cp, g) => {
        const issued = await cp.createKey(opts.dataSet);
        if (g.json) return void ctx.out(JSON.stringify({ key_id: issued.keyId, secret: issued.secret, data_sets: issued.dataSets }));
        ctx.out(`key id:    ${issued.keyId}\nsecret:    ${issued.secret}\ndata sets: ${issued.dataSets.join(', ')}\nThe secret is shown once. Store it in the sender's secret manager.`);
      }),
    );
  key
    .command('rotate <key_id>')
    .description('issue a new secret; the previous one verifies until the grace period ends')
    .option('--grace <duration>', 'how long the previous secret keeps verifying, like 30s, 10m, 1h (at most 365d)', '1h')
    .action((keyId: string, opts: { grace: string }) => {
      // Validated before the control plane is even opened: a refused grace writes nothing.
      const graceMs = parseDurationMs(opts.grace, { max: MAX_ROTATION_GRACE_MS, what: 'the grace period' });
      return ctx.withControl(async (cp, g) => {
        const rotated = await cp.rotateKey(keyId, graceMs);
        const json = { key_id: rotated.keyId, secret: rotated.secret, previous_secret_valid_until: iso(rotated.previousSecretValidUntil) };
        ctx.out(g.json ? JSON.stringify(json) : `key id:  ${json.key_id}\nsecret:  ${json.secret}\nprevious secret valid until ${json.previous_secret_valid_until}`);
      });
    });
  key
    .command('revoke <key_id>')
    .description('revoke a key; running servers refuse it within seconds')
    .action((keyId: string) =>
      ctx.withControl(async (cp, g) => {
        const record = await cp.revokeKey(keyId);
        ctx.out(g.json ? JSON.stringify(keyJson(record)) : `revoked key ${keyId}`);
      }),
    );
  key
    .command('list')
    .description('list keys (never prints secrets)')
    .action(() =>
      ctx.withControl(async (cp, g) => {
        const keys = (await cp.listKeys()).map(keyJson);
        if (g.json) return void ctx.out(JSON.stringify(keys));
        if (keys.length === 0) return void ctx.out('no keys');
        for (const k of keys) ctx.out(`${k.key_id}\t${k.status}\tdata sets: ${k.data_sets.join(', ') || '-'}\tcreated ${k.created_at}${k.rotated_at ? `\trotated ${k.rotated_at}` : ''}`);
      }),
    );
}
