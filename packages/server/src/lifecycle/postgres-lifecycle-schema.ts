/**
 * The PostgreSQL tables of the data lifecycle (migration 4, storage/postgres/migrations.ts): the
 * same as lifecycle.db of the embedded profile (sqlite-lifecycle-store.ts), and the index view
 * retention reads by data set and age.
 */
export const LIFECYCLE_SCHEMA_SQL = `
CREATE TABLE lifecycle_meta (id integer PRIMARY KEY CHECK (id = 1), digest_key bytea NOT NULL, version bigint NOT NULL);
CREATE TABLE deletion_requests (
  id bigserial PRIMARY KEY,
  data_set_id text NOT NULL,
  kind text NOT NULL,
  target text,
  target_digest text NOT NULL,
  suppress boolean NOT NULL,
  bound_seq bigint NOT NULL,
  actor text NOT NULL,
  requested_at bigint NOT NULL,
  state text NOT NULL,
  done_at bigint,
  result text,
  claimed_until bigint
);
CREATE INDEX deletion_requests_pending ON deletion_requests (state) WHERE state = 'pending';
CREATE TABLE suppressions (
  data_set_id text NOT NULL,
  digest text NOT NULL,
  request_id bigint NOT NULL,
  added_at bigint NOT NULL,
  PRIMARY KEY (data_set_id, digest)
);
CREATE INDEX view_records_expiry ON view_records (data_set_id, last_received_at);
`;

/** Migration 5 (issue 29): digests of the event ids a deletion request deleted (`events get` says so). */
export const DELETED_EVENTS_SQL = `
CREATE TABLE deleted_events (
  data_set_id text NOT NULL,
  event_digest text NOT NULL,
  request_id bigint NOT NULL,
  PRIMARY KEY (data_set_id, event_digest)
);
`;
