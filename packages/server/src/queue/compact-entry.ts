/**
 * The compact entry of a queued event (issue 30, experiment): what the merged-view consumer needs
 * to key, link and flag an event, computed once by the serving process, which has the event parsed
 * and validated already, and stored beside the segment's events (`entries`, a JSON array parallel to
 * the events). The consumer then neither extracts identifiers nor computes the key itself.
 *
 * Entry of one event: `[recordKey | null, flags, ...identifiers]`:
 * - recordKey: merge.ts recordKeyOf without the queue position (null: the event has no id, its key is
 *   `seq:<seq>`, known only once the commit numbers it);
 * - flags: bit 0 measurement-only (analytics/hourly.ts isMeasurementOnly);
 * - identifiers: identity.ts identifiersOf of the normalized event, sorted, without repeats.
 *
 * The identifiers are personal data exactly as the event's own fields are: the lifecycle erasers
 * clear a segment's entries with its events.
 */
import { isMeasurementOnly } from '../analytics/hourly.js';
import { identifiersOf, normalizeEvent } from '../merged-view/identity.js';
import type { JsonObject } from '../merged-view/merge.js';
import type { EventPolicyMeta } from '../validation/event-check.js';

export type CompactEntry = readonly (string | number | null)[];

export const ENTRY_MEASUREMENT_ONLY = 1;

export function compactEntryOf(event: JsonObject, meta: EventPolicyMeta | undefined): CompactEntry {
  const normalized = normalizeEvent(event);
  const id = normalized.id;
  const flags = isMeasurementOnly(event, meta) ? ENTRY_MEASUREMENT_ONLY : 0;
  return [typeof id === 'string' && id !== '' ? `id:${id}` : null, flags, ...identifiersOf(normalized)];
}

/** The entries of one request's events, as stored (JSON text). */
export function compactEntriesOf(events: readonly JsonObject[], metas: readonly (EventPolicyMeta | undefined)[]): string {
  return JSON.stringify(events.map((event, i) => compactEntryOf(event, metas[i])));
}
