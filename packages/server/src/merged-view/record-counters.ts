/**
 * What one merged record contributes to its hour's counters (the names: model/hourly-counters.ts).
 * Pure functions of the record, like merge.ts and identity.ts: the consumer sums them per batch
 * (consumer/counter-deltas.ts), so that the same records give the same counters whatever the batch
 * boundaries were.
 */
import type { Counters } from '../model/hourly-counters.js';
import { COVERAGE_FIELDS, coverageOf } from './identity.js';
import { isPlainObject, type JsonObject } from './merge.js';

/** Value in millionths, rounded, so that sums are exact integers. */
export function toMicros(value: number): number {
  return Math.round(value * 1_000_000);
}

/** The counters one merged record contributes to the hour of its first_received_at. */
export function contributionOf(event: JsonObject, measurementOnly: boolean): Counters {
  const counters: Counters = new Map();
  const type = typeof event.event_type === 'string' ? event.event_type : '(none)';
  counters.set('events', 1);
  counters.set(`type:${type}`, 1);
  counters.set(`source:${typeof event.source === 'string' ? event.source : '(none)'}`, 1);
  if (typeof event.value === 'number' && Number.isFinite(event.value) && typeof event.currency_code === 'string') {
    const micros = toMicros(event.value);
    if (micros !== 0) counters.set(`value:${event.currency_code.toUpperCase()}`, micros);
  }
  const coverage = coverageOf(event);
  for (const field of COVERAGE_FIELDS) if (coverage[field]) counters.set(`cov:${type}:${field}`, 1);
  if (measurementOnly) counters.set('mmt', 1);
  return counters;
}

/** Whether a queued record is measurement-only: consent policy decided so, or the sender said so. */
export function isMeasurementOnly(event: JsonObject, meta: { consent?: { decision?: string } } | undefined): boolean {
  if (meta?.consent?.decision === 'measurement_only') return true;
  return isPlainObject(event.user_data) && event.user_data.mmt_only === true;
}
