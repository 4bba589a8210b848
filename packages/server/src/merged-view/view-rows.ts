/**
 * Rows of the merged-view tables as both stores return them, mapped to the view's types in one
 * place. The two drivers differ only in booleans: SQLite returns 0/1, PostgreSQL true/false.
 */
import type { IdentityNode, MergedRecord } from './view-store.js';

type JsonObject = MergedRecord['event'];

export interface RecordRow {
  data_set_id: string;
  record_key: string;
  event_id: string | null;
  first_seq: number;
  last_seq: number;
  first_received_at: number;
  last_received_at: number;
  merged_count: number;
  identity_key: string | null;
  measurement_only: boolean | number;
  event: string;
}

export interface NodeRow {
  data_set_id: string;
  identity_key: string;
  parent: string | null;
  created_seq: number;
  event_count: number;
  identifier_count: number;
}

export const recordOf = (row: RecordRow): MergedRecord => ({
  dataSetId: row.data_set_id,
  recordKey: row.record_key,
  eventId: row.event_id,
  firstSeq: row.first_seq,
  lastSeq: row.last_seq,
  firstReceivedAt: row.first_received_at,
  lastReceivedAt: row.last_received_at,
  mergedCount: row.merged_count,
  identityKey: row.identity_key,
  measurementOnly: row.measurement_only === true || row.measurement_only === 1,
  event: JSON.parse(row.event) as JsonObject,
});

export const nodeOf = (row: NodeRow): IdentityNode => ({
  dataSetId: row.data_set_id,
  identityKey: row.identity_key,
  parent: row.parent,
  createdSeq: row.created_seq,
  eventCount: row.event_count,
  identifierCount: row.identifier_count,
});
