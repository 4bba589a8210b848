/**
 * Hourly counters: the shape in which the merged view and ingest keep their figures, shared by the
 * stores that write them (merged-view/), the consumer that computes them (consumer/counter-deltas.ts
 * from merged-view/record-counters.ts) and the analytics that read them
 * (analytics/stats-document.ts). Storage only ever adds integer deltas to named counters per
 * (data set, UTC hour), so that the same records always give the same figures, whatever the batch
 * boundaries were.
 *
 * Counters of the merged view (per data set and UTC hour of the record's first_received_at):
 *   events                  distinct events (merged records)
 *   type:<event_type>       events by event_type
 *   source:<source>         events by source ("(none)" when absent)
 *   value:<currency>        summed value, in millionths of the currency unit (exact integer sums)
 *   cov:<event_type>:<kind> events of that type carrying the identifier kind (merged-view/identity.ts COVERAGE_FIELDS)
 *   mmt                     measurement-only events
 * and per UTC hour of the arriving record's received_at:
 *   received                queued records applied (including re-sends)
 *   merged                  records merged into an existing record
 *   discarded               records discarded because they arrived after the merge window
 *   suppressed              records dropped because they carried a suppressed identifier
 * Counters of ingest (written by the serving processes, per hour of arrival):
 *   accepted, rejected, reason:<group>
 */

export const HOUR_MS = 3_600_000;

/** Start (ms) of the UTC hour holding `ms`. */
export function hourOf(ms: number): number {
  return Math.floor(ms / HOUR_MS) * HOUR_MS;
}

/** Named counters (of one data set and hour, or summed over a range). */
export type Counters = Map<string, number>;

export function addCounter(counters: Counters, name: string, delta: number): void {
  if (delta === 0) return;
  counters.set(name, (counters.get(name) ?? 0) + delta);
}

/** One stored counter: its hour, its name, its value. */
export interface CounterRow {
  readonly hour: number;
  readonly name: string;
  readonly n: number;
}
