/**
 * Groups of rejection messages, as ingest counts them (`reason:<group>` counters, written by
 * buffered-outcome-recorder.ts) and as the stats document reads them back (stats-document.ts).
 */
import { storedReasonOf } from '../validation/stored-reason.js';

const MAX_REASON_LENGTH = 160;

/**
 * The group of a stored reason (the request path's stored form, validation/stored-reason.ts, made
 * from the rejection's `{code, message}`): array indexes replaced by `[]`, so that `hashed field
 * user_data.email_address[3] is not …` and `…[0] …` count together. Used when counting.
 */
export function groupOfStoredReason(stored: string): string {
  const grouped = stored.replace(/\[\d+\]/g, '[]').replace(/\/\d+(?=\/|\s|$)/g, '/[]');
  return grouped.length > MAX_REASON_LENGTH ? `${grouped.slice(0, MAX_REASON_LENGTH)}…` : grouped;
}

/**
 * The group of a rejection message read back as text (a stored row, or any message): stored form
 * first (idempotent), so that rows stored before the masking existed are served masked too.
 */
export function reasonGroupOf(message: string): string {
  return groupOfStoredReason(storedReasonOf(message));
}
