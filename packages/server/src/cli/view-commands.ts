/**
 * CLI of the asynchronous side: the consumer process (`worker`, `worker status`), the merged view
 * (`events get`, `events export`), identities (`identities get`) and analytics (`stats`).
 * Reads open view.db alongside a running consumer (WAL: readers never block it).
 */
import { Command, Option } from 'commander';
import { parseSince, StatsReader } from '../analytics/stats-reader.js';
import type { StatsDocument, StatsFigures } from '../analytics/stats-document.js';
import { VIEW_CONSUMER } from '../model/consumer-offsets.js';
import { runViewWorker } from '../view-worker.js';
import { MAX_VIEW_PARTITIONS, VIEW_LAYOUT_KINDS, type ViewLayoutKind } from '../merged-view/sqlite-view-layout.js';
import { DEFAULT_HOT_LINKS, MAX_HOT_LINKS } from '../merged-view/view-hot-state.js';
import { DEFAULT_CONSUMER_NICE, MAX_NICE } from '../consumer/consumer-priority.js';
import { recordKeyForId } from '../merged-view/merge.js';
import type { MergedRecord, ViewStore } from '../merged-view/view-store.js';
import type { ConsumerWorkers } from '../merged-view/postgres-consumer-workers.js';
import { parseIdentifier } from './lifecycle-commands.js';
import { createLogger } from '../observability/logger.js';
import { CliError, writeWithBackpressure } from './cli-io.js';
import { parseDurationMs } from '../control/duration.js';
import type { CliContext } from './cli-context.js';
import { requireDataSet } from './known-data-set.js';
import { diskIsFull, ecapiProcessAlive, formatBytes, freeSpace } from './storage-health.js';

const iso = (ms: number) => new Date(ms).toISOString();

/** `worker status`'s lines of the PostgreSQL assignment: each worker with the lanes it holds, then the lanes nobody holds. */
function workersText({ workers, unheldLanes }: ConsumerWorkers): string {
  const lines = [`workers: ${workers.length}`];
  for (const w of workers) {
    const seen = Math.round(w.seenAgoMs / 1000);
    lines.push(`  ${w.worker} (pid ${w.pid} on ${w.host}), seen ${seen} s ago: ${w.lanes.length === 0 ? 'holds no lane' : `${w.lanes.length} lane(s) ${w.lanes.join(',')}`}`);
  }
  lines.push(`lanes held by no worker: ${unheldLanes.length === 0 ? 'none' : `${unheldLanes.length} (${unheldLanes.join(',')}): nobody applies them until a worker claims them`}`);
  return lines.join('\n');
}

/** The JSON form of a merged record (`events get`, one line of `events export`). */
export async function mergedRecordJson(store: ViewStore, record: MergedRecord) {
  const identityKey = record.identityKey === null ? null : ((await store.resolveIdentity(record.dataSetId, record.identityKey)) ?? record.identityKey);
  return {
    data_set_id: record.dataSetId,
    id: record.eventId,
    identity_key: identityKey,
    first_received_at: iso(record.firstReceivedAt),
    last_received_at: iso(record.lastReceivedAt),
    merged_count: record.mergedCount,
    measurement_only: record.measurementOnly,
    first_seq: record.firstSeq,
    last_seq: record.lastSeq,
    event: record.event,
  };
}

function statsText(doc: StatsDocument): string {
  const f: StatsFigures = doc.totals;
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  const lines = [
    `data set ${doc.data_set_id}, since ${doc.since} (${doc.hours.length} hour(s) with data)`,
    `events: ${f.events} distinct (${f.received} received, ${f.merged_duplicates} merged duplicates, ${f.discarded_after_merge_window} discarded after the merge window)`,
    `ingest: ${f.ingest.accepted} accepted, ${f.ingest.rejected} rejected`,
    ...Object.entries(f.ingest.rejections).map(([reason, n]) => `  ${n}\t${reason}`),
    `by event_type: ${Object.entries(f.by_event_type).map(([k, n]) => `${k}=${n}`).join(' ') || '-'}`,
    `by source: ${Object.entries(f.by_source).map(([k, n]) => `${k}=${n}`).join(' ') || '-'}`,
    `value: ${Object.entries(f.value_by_currency).map(([k, n]) => `${n} ${k}`).join(', ') || '-'}`,
    `identifier coverage: ${Object.entries(f.identifier_coverage).map(([k, x]) => `${k}=${pct(x)}`).join(' ')}`,
    `measurement-only: ${pct(f.measurement_only_share)}`,
    `match quality (0-10): ${Object.entries(f.match_quality).map(([k, q]) => `${k}=${q.score}`).join(' ') || '-'}`,
  ];
  return lines.join('\n');
}

export function registerViewCommands(program: Command, ctx: CliContext): void {
  /** `dataSetId`: the data set the command reads, refused when the control plane does not know it. */
  const withReader = <T>(fn: (reader: StatsReader) => Promise<T>, dataSetId?: string): Promise<T> =>
    ctx.withStorage(async (storage) => {
      if (dataSetId !== undefined) await requireDataSet(storage, dataSetId);
      const reader = new StatsReader(storage);
      try {
        return await fn(reader);
      } finally {
        await reader.close();
      }
    });

  // worker
  const worker = program
    .command('worker')
    .description('run the merged-view consumer (identities, analytics) until SIGTERM; `serve` runs one unless --no-worker')
    .addOption(new Option('--batch-size <n>', 'queue records per transaction').default('2000'))
    .addOption(new Option('--retention <duration>', 'delete queue records the merged view has applied and older than this (0 keeps them)').env('ECAPI_QUEUE_RETENTION').default('7d'))
    .addOption(new Option('--retention-every <duration>', 'how often retention runs').env('ECAPI_QUEUE_RETENTION_EVERY').default('1m'))
    .addOption(new Option('--view-retention-every <duration>', "how often the merged view's retention (data-set policy --view-retention) runs").env('ECAPI_VIEW_RETENTION_EVERY').default('1m'))
    .addOption(
      new Option(
        '--old-copies-every <duration>',
        "after retention deleted rows, how often the files' pages are scrubbed of old copies (embedded; PostgreSQL: a VACUUM of the view's tables); the WAL is cut after every round; 0: after every round",
      )
        .env('ECAPI_OLD_COPIES_EVERY')
        .default('15m'),
    )
    .addOption(
      new Option('--view-partitions <n>', 'view partitions, fixed when the view is first consumed: embedded, data sets spread over n files applied by n threads; PostgreSQL with --view-layout sharded, record shards per queue partition (default 2)')
        .env('ECAPI_VIEW_PARTITIONS'),
    )
    .addOption(
      new Option(
        '--view-layout <layout>',
        '"data-sets" (default: a data set applied by one thread) or "sharded" (a data set\'s records spread over the partitions, or on PostgreSQL over record-shard lanes any worker may lease, its identities applied by one more: one large sender, cores to spare); fixed when the view is first consumed',
      )
        .env('ECAPI_VIEW_LAYOUT')
        .choices(VIEW_LAYOUT_KINDS),
    )
    .addOption(
      new Option('--view-hot-links <n>', 'identifier links kept in memory while all of a data set\'s fit: per view partition (embedded), per worker process (PostgreSQL); 0: none')
        .env('ECAPI_VIEW_HOT_LINKS')
        .default(String(DEFAULT_HOT_LINKS)),
    )
    .addOption(
      new Option('--nice <n>', "CPU priority (nice, 0 to 19) of the consumer's threads: above 0 it yields the CPU to the serving processes and falls behind instead of slowing them; 0 leaves it alone")
        .env('ECAPI_WORKER_NICE')
        .default(String(DEFAULT_CONSUMER_NICE)),
    )
    .action((opts: { batchSize: string; retention: string; retentionEvery: string; viewRetentionEvery: string; oldCopiesEvery: string; viewPartitions?: string; viewLayout?: ViewLayoutKind; viewHotLinks: string; nice: string }) => {
      const g = ctx.globals();
      const batchSize = Number(opts.batchSize);
      if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 50_000) throw new CliError(`invalid batch size "${opts.batchSize}"`);
      const viewPartitions = opts.viewPartitions === undefined ? undefined : Number(opts.viewPartitions);
      if (viewPartitions !== undefined && (!Number.isInteger(viewPartitions) || viewPartitions < 1 || viewPartitions > MAX_VIEW_PARTITIONS)) {
        throw new CliError(`invalid view partition count "${opts.viewPartitions}" (1 to ${MAX_VIEW_PARTITIONS})`);
      }
      const viewHotLinks = Number(opts.viewHotLinks);
      if (!Number.isInteger(viewHotLinks) || viewHotLinks < 0 || viewHotLinks > MAX_HOT_LINKS) throw new CliError(`invalid hot link count "${opts.viewHotLinks}" (0 to ${MAX_HOT_LINKS})`);
      const nice = /^\d{1,2}$/.test(opts.nice) ? Number(opts.nice) : Number.NaN;
      if (!(nice >= 0 && nice <= MAX_NICE)) {
        throw new CliError(`invalid nice value "${opts.nice}" (--nice or ECAPI_WORKER_NICE: 0 to ${MAX_NICE}; 0 leaves the consumer's CPU priority alone)`);
      }
      const retentionMs = opts.retention === '0' ? 0 : parseDurationMs(opts.retention);
      const retentionEveryMs = parseDurationMs(opts.retentionEvery);
      const viewRetentionEveryMs = parseDurationMs(opts.viewRetentionEvery);
      const oldCopiesEveryMs = opts.oldCopiesEvery === '0' ? 0 : parseDurationMs(opts.oldCopiesEvery);
      const logger = createLogger();
      const stopped = new Promise<void>((resolve) => {
        process.once('SIGTERM', () => resolve());
        process.once('SIGINT', () => resolve());
        // Started by `serve` with an IPC channel: when that parent goes away (however it died), stop
        // gracefully too. The channel is unref'd so that it never keeps a finished worker alive.
        if (process.send) {
          // The parent may already be gone by the time this runs (a serve stopped right after it
          // started): 'disconnect' would never fire again, so check the state as well as the event.
          if (!process.connected) resolve();
          process.once('disconnect', () => resolve());
          process.channel?.unref();
          // Belt and braces: re-parented to init means the serve process died.
          const parent = process.ppid;
          const watch = setInterval(() => {
            if (process.ppid !== parent) resolve();
          }, 1000);
          watch.unref();
        }
      });
      ctx.keepAlive(
        runViewWorker({
          dataDir: g.dataDir, env: g.env, databaseUrl: g.databaseUrl, logger, stopped, batchSize, retentionMs, retentionEveryMs, viewRetentionEveryMs, oldCopiesEveryMs, viewPartitions, viewHotLinks, nice,
          ...(opts.viewLayout ? { viewLayout: opts.viewLayout } : {}),
        }).finally(() => logger.flush()),
      );
    });
  worker
    .command('status')
    .description('consumer offset, lag (records and seconds) and whether a consumer is running; on PostgreSQL, each worker with the lanes it holds')
    .action(() =>
      withReader(async (reader) => {
        const g = ctx.globals();
        const now = Date.now();
        const lag = await reader.lag(now);
        const beat = await reader.view().lastHeartbeat(VIEW_CONSUMER);
        const fresh = beat !== null && beat.at > 0 && now - beat.at < 10_000;
        // A heartbeat that stopped without a clean stop (at = 0) whose process is alive (embedded
        // profile: the consumer runs on this machine) is a consumer that cannot write: on a full
        // disk, say so rather than "not running" (issue 29).
        const stalled = !fresh && beat !== null && beat.at > 0 && g.databaseUrl === undefined && ecapiProcessAlive(beat.pid);
        const running = fresh || stalled;
        const space = g.databaseUrl === undefined ? freeSpace(g.dataDir) : null;
        const full = space !== null && diskIsFull(space);
        const problem = stalled
          ? `its heartbeat stopped ${Math.round((now - beat!.at) / 1000)} s ago: it cannot write to the view` +
            (full ? `: the data dir's disk is full (${formatBytes(space!.free)} free on ${g.dataDir})` : ' (see its log)')
          : full
            ? `the data dir's disk is full (${formatBytes(space!.free)} free on ${g.dataDir}): the consumer cannot apply events and ingestion answers 500 until space is freed`
            : null;
        const layout = (await reader.view().layout?.()) ?? null;
        const assignment = (await reader.view().workers?.()) ?? null;
        const json = {
          consumer: VIEW_CONSUMER,
          running,
          stalled,
          pid: running ? beat!.pid : null,
          heartbeat_at: beat && beat.at > 0 ? iso(beat.at) : null,
          ...(layout ? { view_layout: layout.kind, view_partitions: layout.partitions } : {}),
          ...lag,
          ...(space ? { data_dir_free_bytes: space.free } : {}),
          ...(assignment
            ? {
                workers: assignment.workers.map((w) => ({ worker: w.worker, host: w.host, pid: w.pid, seen_at: iso(w.seenAt), seen_seconds_ago: Math.round(w.seenAgoMs / 1000), lanes: w.lanes })),
                unheld_lanes: assignment.unheldLanes,
              }
            : {}),
          problem,
        };
        if (g.json) return void ctx.out(JSON.stringify(json));
        ctx.out(
          `consumer ${json.consumer}: ${stalled ? `running (pid ${json.pid}) but stalled` : running ? `running (pid ${json.pid})` : 'not running'}\n` +
            (layout
              ? g.databaseUrl !== undefined && layout.kind === 'sharded'
                ? `view: layout sharded, ${layout.partitions} record shard(s) per queue partition\n`
                : `view: ${layout.partitions} partition(s), layout ${layout.kind}\n`
              : '') +
            `next seq ${lag.next_seq}, queue last seq ${lag.queue_last_seq}\n` +
            `lag: ${lag.lag_records} record(s), ${lag.lag_seconds} s` +
            (assignment ? '\n' + workersText(assignment) : '') +
            (problem ? `\nproblem: ${problem}` : ''),
        );
      }),
    );

  // events
  const events = program.command('events').description('read the merged view');
  events
    .command('get <data_set_id> <id>')
    .description('print the merged record of an event id as JSON')
    .action((dataSetId: string, id: string) =>
      ctx.withStorage(async (storage) => {
        await requireDataSet(storage, dataSetId);
        const reader = new StatsReader(storage);
        try {
          const store = reader.view();
          const record = await store.getRecord(dataSetId, recordKeyForId(id));
          if (record) return void ctx.out(JSON.stringify(await mergedRecordJson(store, record)));
          // Deleted? The lifecycle store keeps keyed digests of the ids a deletion removed, never the ids.
          const deletion = await storage.lifecycle().store.deletedBy(dataSetId, id).catch(() => null);
          if (deletion) {
            const command = deletion.kind === 'delete_event' ? 'events delete' : 'identities forget';
            throw new CliError(`no merged record for id "${id}" in data set ${dataSetId}: it was deleted by deletion request ${deletion.id} (${command}${deletion.doneAt !== null ? `, ${iso(deletion.doneAt)}` : ''})`);
          }
          throw new CliError(`no merged record for id "${id}" in data set ${dataSetId} (not sent, not consumed yet, or expired by the view retention)`);
        } finally {
          await reader.close();
        }
      }),
    );
  events
    .command('export')
    .description('print merged records as NDJSON, in order of first arrival')
    .requiredOption('--data-set <id>', 'data set (required)')
    .option('--since <time>', 'only records updated since: a duration back from now (24h) or an ISO 8601 time')
    .action((opts: { dataSet: string; since?: string }) =>
      withReader(async (reader) => {
        const since = opts.since === undefined ? 0 : parseSince(opts.since, Date.now());
        const store = reader.view();
        await store.exportRecords(opts.dataSet, since, async (page) => {
          const lines: string[] = [];
          for (const record of page) lines.push(JSON.stringify(await mergedRecordJson(store, record)));
          await writeWithBackpressure(ctx.io.stdout, lines.join('\n') + '\n');
        });
      }, opts.dataSet),
    );

  // identities
  const identities = program.command('identities').description('read identities (events linked by shared identifiers)');
  identities
    .command('get <data_set_id> [identity_key]')
    .description('print an identity: its live key, identifiers and event count; by its key, or by one of its identifiers')
    .option('--identifier <type:value>', 'look the identity up by an identifier, as `identities forget` takes it: email:<sha256 hex>, phone:<sha256 hex>, cid:<sha256 hex>, uid:<id>, ifa:<id>')
    .action((dataSetId: string, identityKey: string | undefined, opts: { identifier?: string }) => {
      if ((identityKey === undefined) === (opts.identifier === undefined)) throw new CliError('give exactly one of <identity_key> and --identifier');
      const identifier = opts.identifier === undefined ? undefined : parseIdentifier(opts.identifier);
      return withReader(async (reader) => {
        const view = reader.view();
        let key = identityKey;
        if (identifier !== undefined) {
          key = (await view.identityOfIdentifier(dataSetId, identifier)) ?? undefined;
          // The identifier itself is not echoed (it may be a digest of a person's email).
          if (key === undefined) throw new CliError(`no identity with that ${identifier.slice(0, identifier.indexOf(':'))} identifier in data set ${dataSetId}`);
        }
        const identity = await view.getIdentity(dataSetId, key!);
        if (!identity) throw new CliError(`no identity "${key}" in data set ${dataSetId}`);
        const json = {
          data_set_id: identity.dataSetId,
          identity_key: identity.identityKey,
          requested_key: identity.requestedKey,
          absorbed_keys: identity.absorbedKeys,
          event_count: identity.eventCount,
          identifiers: identity.identifiers,
        };
        if (ctx.globals().json) return void ctx.out(JSON.stringify(json));
        ctx.out(
          `identity ${json.identity_key}${json.requested_key !== json.identity_key ? ` (${json.requested_key} was merged into it)` : ''}\n` +
            `events: ${json.event_count}\nidentifiers (${json.identifiers.length}):\n` +
            json.identifiers.map((i) => `  ${i}`).join('\n'),
        );
      }, dataSetId);
    });

  // stats
  program
    .command('stats <data_set_id>')
    .description('analytics of a data set per hour: events by type and source, value, ingest outcomes, coverage, match quality')
    .option('--since <time>', 'a duration back from now (24h, 7d) or an ISO 8601 time', '24h')
    .action((dataSetId: string, opts: { since: string }) =>
      withReader(async (reader) => {
        const doc = await reader.stats(dataSetId, parseSince(opts.since, Date.now()));
        ctx.out(ctx.globals().json ? JSON.stringify(doc) : statsText(doc));
      }, dataSetId),
    );
}
