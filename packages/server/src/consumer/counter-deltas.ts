/**
 * Counter deltas of one batch, in memory: the analytics part of applying a batch.
 *
 * Per arriving record, in the hour of its received_at: `received`, and `merged` or `discarded`.
 * Per merged record the batch touched, in the hour of its first_received_at: the contribution of
 * the record as stored before the batch is subtracted and that of its final state added
 * (merged-view/record-counters.ts `contributionOf`). A record merged several times within a batch passes
 * through intermediate states whose contributions would cancel out; only the two ends are
 * computed. The sums are integers, so the result is the same whatever the batch boundaries.
 */
import { hourOf } from '../model/hourly-counters.js';
import { contributionOf } from '../merged-view/record-counters.js';
import type { JsonObject } from '../merged-view/merge.js';
import type { DataSetCounterDelta, MergedRecord } from '../merged-view/view-store.js';

export class CounterDeltas {
  /** dataSetId → hour → counter name → delta. */
  readonly #byDataSet = new Map<string, Map<number, Map<string, number>>>();

  add(dataSetId: string, hour: number, name: string, n: number): void {
    if (n === 0) return;
    let hours = this.#byDataSet.get(dataSetId);
    if (!hours) this.#byDataSet.set(dataSetId, (hours = new Map()));
    let names = hours.get(hour);
    if (!names) hours.set(hour, (names = new Map()));
    names.set(name, (names.get(name) ?? 0) + n);
  }

  /** What a record contributes (+1) or no longer contributes (-1) to its first hour. */
  addRecord(record: MergedRecord, sign: 1 | -1): void {
    this.#addContribution(record.dataSetId, hourOf(record.firstReceivedAt), record.event, record.measurementOnly, sign);
  }

  #addContribution(dataSetId: string, hour: number, event: JsonObject, measurementOnly: boolean, sign: 1 | -1): void {
    for (const [name, n] of contributionOf(event, measurementOnly)) this.add(dataSetId, hour, name, sign * n);
  }

  /**
   * Per key a batch touched: the stored record's contribution taken away (if it was stored) and the
   * batch's final record's added.
   */
  addReplaced(current: ReadonlyMap<string, MergedRecord>, stored: ReadonlyMap<string, MergedRecord>): void {
    for (const [pk, next] of current) {
      const before = stored.get(pk);
      if (before) this.addRecord(before, -1);
      this.addRecord(next, 1);
    }
  }

  /** The non-zero deltas. */
  deltas(): DataSetCounterDelta[] {
    const out: DataSetCounterDelta[] = [];
    for (const [dataSetId, hours] of this.#byDataSet) {
      for (const [hour, names] of hours) for (const [name, n] of names) if (n !== 0) out.push({ dataSetId, hour, name, n });
    }
    return out;
  }
}
