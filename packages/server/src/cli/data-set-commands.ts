/**
 * `data-set create|list|policy|limits`: data sets, their privacy and validation policy and their
 * rate limits. Rules (id syntax, bounds, versioning) are the control plane's; this file parses
 * options and prints.
 */
import { Option, type Command } from 'commander';
import type { DataSetRecord, PolicyPatch } from '../control/control-plane.js';
import { MAX_POLICY_WINDOW_SECONDS } from '../control/data-set-policy.js';
import { formatDurationMs, isoOrNull, parseDurationMs, parseWholeSeconds } from '../control/duration.js';
import type { CliContext } from './cli-context.js';
import { oneOf, parsePositive } from './cli-parsers.js';

// Never throws, whatever a stored row holds: a listing must not fail for one out-of-range time.
const iso = isoOrNull;

function dataSetJson(record: DataSetRecord) {
  const { policy } = record;
  return {
    id: record.id,
    created_at: iso(record.createdAt),
    policy: {
      consent: policy.consent,
      ip: policy.ip,
      pii_scan: policy.piiScan,
      max_age: formatDurationMs(policy.maxAgeSeconds * 1000),
      merge_window: formatDurationMs(policy.mergeWindowMs),
      view_retention: formatDurationMs(policy.viewRetentionMs),
      version: policy.version,
    },
    limits: {
      rps: record.limits.rps,
      burst_rps: record.limits.burstRps,
      burst_seconds: record.limits.burstSeconds,
      eps: record.limits.eps,
    },
  };
}

export function registerDataSetCommands(program: Command, ctx: CliContext): void {
  const dataSet = program.command('data-set').description('manage data sets (destination namespaces)');
  dataSet
    .command('create <id>')
    .description('create a data set')
    .action((id: string) =>
      ctx.withControl(async (cp, g) => {
        const record = await cp.createDataSet(id);
        ctx.out(g.json ? JSON.stringify(dataSetJson(record)) : `created data set ${record.id}`);
      }),
    );
  dataSet
    .command('list')
    .description('list data sets with their effective policy')
    .action(() =>
      ctx.withControl(async (cp, g) => {
        const records = (await cp.listDataSets()).map(dataSetJson);
        if (g.json) return void ctx.out(JSON.stringify(records));
        if (records.length === 0) return void ctx.out('no data sets');
        for (const r of records) {
          ctx.out(
            `${r.id}\tcreated ${r.created_at}\tconsent=${r.policy.consent} ip=${r.policy.ip} pii_scan=${r.policy.pii_scan} max_age=${r.policy.max_age} merge_window=${r.policy.merge_window} view_retention=${r.policy.view_retention} (policy v${r.policy.version})` +
              `\trps=${r.limits.rps} burst_rps=${r.limits.burst_rps} burst_seconds=${r.limits.burst_seconds} eps=${r.limits.eps}`,
          );
        }
      }),
    );
  dataSet
    .command('policy <id>')
    .description('set the privacy and validation policy of a data set')
    .addOption(new Option('--consent <mode>', 'GPP opt-outs: enforce (measurement-only), reject, off').argParser(oneOf('consent', ['enforce', 'reject', 'off'] as const)))
    .addOption(new Option('--ip <mode>', 'IP addresses: keep, truncate, drop').argParser(oneOf('ip', ['keep', 'truncate', 'drop'] as const)))
    .addOption(new Option('--pii-scan <mode>', 'plaintext emails in free text: redact, reject, off').argParser(oneOf('pii-scan', ['redact', 'reject', 'off'] as const)))
    .option('--max-age <duration>', 'oldest accepted event timestamp, like 90d')
    .option('--merge-window <duration>', 'record update window of the merged view, like 7d')
    .option('--view-retention <duration>', 'merged records not updated for this long are deleted, like 400d (at least the merge window and the max age)')
    .action((id: string, opts: { consent?: 'enforce' | 'reject' | 'off'; ip?: 'keep' | 'truncate' | 'drop'; piiScan?: 'redact' | 'reject' | 'off'; maxAge?: string; mergeWindow?: string; viewRetention?: string }) =>
      ctx.withControl(async (cp, g) => {
        const patch: { -readonly [K in keyof PolicyPatch]: PolicyPatch[K] } = {};
        if (opts.consent) patch.consent = opts.consent;
        if (opts.ip) patch.ip = opts.ip;
        if (opts.piiScan) patch.piiScan = opts.piiScan;
        const window = { max: MAX_POLICY_WINDOW_SECONDS * 1000 };
        if (opts.maxAge) patch.maxAgeSeconds = parseWholeSeconds('--max-age', opts.maxAge, { ...window, what: 'the maximum event age' });
        // Milliseconds, exactly: `500ms` is a 500 ms window, never 0 (which would turn merging off).
        if (opts.mergeWindow) patch.mergeWindowMs = parseDurationMs(opts.mergeWindow, { ...window, what: 'the merge window' });
        if (opts.viewRetention) patch.viewRetentionMs = parseDurationMs(opts.viewRetention, { ...window, what: 'the view retention' });
        const record = await cp.setPolicy(id, patch);
        const json = dataSetJson(record);
        ctx.out(g.json ? JSON.stringify(json) : `data set ${id}: policy v${json.policy.version} ${JSON.stringify(json.policy)}`);
      }),
    );

  dataSet
    .command('limits <id>')
    .description('override the rate limits of a data set (unset options keep their value)')
    .option('--rps <n>', 'sustained requests per second (default 1000)')
    .option('--burst-rps <n>', 'requests in any one second, at most (default 5000)')
    .option('--burst-seconds <n>', 'how long an idle data set may run at burst-rps (default 60)')
    .option('--eps <n>', 'sustained events per second across batches (default 100000)')
    .action((id: string, opts: { rps?: string; burstRps?: string; burstSeconds?: string; eps?: string }) =>
      ctx.withControl(async (cp, g) => {
        const patch: { rps?: number; burstRps?: number; burstSeconds?: number; eps?: number } = {};
        if (opts.rps) patch.rps = parsePositive(opts.rps);
        if (opts.burstRps) patch.burstRps = parsePositive(opts.burstRps);
        if (opts.burstSeconds) patch.burstSeconds = parsePositive(opts.burstSeconds);
        if (opts.eps) patch.eps = parsePositive(opts.eps);
        const json = dataSetJson(await cp.setLimits(id, patch));
        ctx.out(g.json ? JSON.stringify(json) : `data set ${id}: limits ${JSON.stringify(json.limits)}`);
      }),
    );
}
