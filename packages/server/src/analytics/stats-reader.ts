/**
 * Read side of the asynchronous part for a serving process and the CLI: the stats document of a
 * data set (view counters + ingest counters) and the consumer's lag, straight from the storage; no
 * IPC with the consumer is needed. Connections open lazily and stay open. It reads whatever
 * profile it is given (a Storage satisfies StatsSources): storage/open-storage.ts alone chooses.
 */
import { Gauge, type Registry } from 'prom-client';
import { parseDurationMs } from '../control/duration.js';
import type { IngestStatsStore, ViewStore } from '../merged-view/view-store.js';
import type { ConsumerLag } from '../model/consumer-lag.js';
import { hourOf, type CounterRow } from '../model/hourly-counters.js';
import { statsDocument, type StatsDocument } from './stats-document.js';

export const DEFAULT_STATS_WINDOW = '24h';

/** `--since` / `?since=`: a duration back from now (`24h`, `7d`), an ISO 8601 time, or epoch ms. */
export function parseSince(text: string | undefined, nowMs: number): number {
  const value = (text ?? DEFAULT_STATS_WINDOW).trim();
  if (/^\d+(?:\.\d+)?\s*(ms|s|m|h|d)$/.test(value)) return nowMs - parseDurationMs(value);
  if (/^\d{10,}$/.test(value)) return Number(value);
  const parsed = Date.parse(value);
  if (Number.isNaN(parsed)) throw new Error(`invalid time "${value}": use a duration back from now (24h, 7d) or an ISO 8601 time`);
  return parsed;
}

/**
 * The ingest counter rows of the stats document. `accepted` comes from the queue's own counts
 * (written by the commit that stored the events: exact, even after a SIGKILL of the server);
 * rejections from ingest-stats, flushed about once a second by the serving processes (best-effort:
 * rejected events are never queued, and the last second's counts die with a killed process).
 * `accepted` rows of ingest-stats are from before the queue kept counts: they are used only for
 * hours the queue has no count of (its segments were pruned before the counts existed).
 */
export function ingestRows(ingest: readonly CounterRow[], accepted: readonly CounterRow[] | null): CounterRow[] {
  if (accepted === null) return [...ingest];
  const counted = new Set(accepted.map((r) => r.hour));
  return [...ingest.filter((r) => r.name !== 'accepted' || !counted.has(r.hour)), ...accepted];
}

/** What the stats are read from: the parts of a Storage this reader uses (the caller owns and closes it). */
export interface StatsSources {
  viewStore(): ViewStore;
  ingestStats(): IngestStatsStore;
  queueReader(): {
    lag(nowMs: number): Promise<ConsumerLag>;
    acceptedCounts(dataSetId: string, sinceHourMs: number): Promise<CounterRow[] | null>;
  };
}

export class StatsReader {
  readonly #storage: StatsSources;
  #ingest: IngestStatsStore | null = null;

  constructor(storage: StatsSources) {
    this.#storage = storage;
  }

  view(): ViewStore {
    return this.#storage.viewStore();
  }

  async stats(dataSetId: string, sinceMs: number): Promise<StatsDocument> {
    this.#ingest ??= this.#storage.ingestStats();
    const since = hourOf(sinceMs);
    const [view, ingest, accepted] = await Promise.all([
      this.view().counters(dataSetId, since),
      this.#ingest.counters(dataSetId, since),
      this.#storage.queueReader().acceptedCounts(dataSetId, since),
    ]);
    return statsDocument(dataSetId, sinceMs, [...view, ...ingestRows(ingest, accepted)]);
  }

  async lag(nowMs = Date.now()): Promise<ConsumerLag> {
    return this.#storage.queueReader().lag(nowMs);
  }

  async close(): Promise<void> {
    await this.#ingest?.close();
    this.#ingest = null;
  }
}

/**
 * Consumer lag gauges, computed on scrape from view.db's offset and the queue's head. With
 * `serve --workers N` every serving process reports the same figures; `max` keeps one.
 */
export function registerConsumerLagGauges(registry: Registry, reader: Pick<StatsReader, 'lag'>): void {
  let last: Promise<ConsumerLag | null> | null = null;
  // Both gauges are collected in one scrape; read the files once for the pair.
  const read = () => {
    last ??= reader.lag().catch(() => null).finally(() => setTimeout(() => (last = null), 50).unref());
    return last;
  };
  new Gauge({
    name: 'ecapi_consumer_lag_records',
    help: 'Queued records the merged-view consumer has not applied yet',
    registers: [registry],
    aggregator: 'max',
    async collect() {
      const lag = await read();
      if (lag) this.set(lag.lag_records);
    },
  });
  new Gauge({
    name: 'ecapi_consumer_lag_seconds',
    help: 'Age of the oldest queued record the merged-view consumer has not applied yet (0 when caught up)',
    registers: [registry],
    aggregator: 'max',
    async collect() {
      const lag = await read();
      if (lag) this.set(lag.lag_seconds);
    },
  });
}
