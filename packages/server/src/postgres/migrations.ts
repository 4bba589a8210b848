/**
 * Versioned schema migrations of the PostgreSQL profile: the whole schema of its one database, every
 * feature's tables (the adapter rule, docs/ARCHITECTURE.md "Layers": PostgreSQL DDL lives here and
 * nowhere else; an embedded store creates its own file's tables). Append only: a released migration
 * is never edited; a change is a new entry. `migrate()` (database.ts) applies what is missing, in order.
 */

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

/** Queue partitions: the unit of work that `worker` processes lease (consumer/postgres-partitions.ts). */
export const QUEUE_PARTITIONS = 16;

const initial = `
-- Control plane: the same tables as control.db.
CREATE TABLE control_meta (id integer PRIMARY KEY CHECK (id = 1), version bigint NOT NULL);
INSERT INTO control_meta (id, version) VALUES (1, 1);
CREATE TABLE data_sets (
  id text PRIMARY KEY,
  created_at bigint NOT NULL,
  policy text NOT NULL,
  limits text
);
CREATE TABLE signing_keys (
  key_id text PRIMARY KEY,
  secret_sealed bytea NOT NULL,
  created_at bigint NOT NULL,
  rotated_at bigint,
  previous_secret_sealed bytea,
  previous_valid_until bigint,
  revoked_at bigint
);
CREATE TABLE grants (
  key_id text NOT NULL REFERENCES signing_keys (key_id),
  data_set_id text NOT NULL REFERENCES data_sets (id),
  created_at bigint NOT NULL,
  PRIMARY KEY (key_id, data_set_id)
);

-- Queue: one row per accepted request, events first_seq .. first_seq + event_count - 1.
-- queue_head.next_seq is the next sequence number; a commit takes its range from it under the
-- row lock, which orders commits and sequence numbers the same way (see queue/DESIGN.md).
CREATE TABLE queue_head (id integer PRIMARY KEY CHECK (id = 1), next_seq bigint NOT NULL);
INSERT INTO queue_head (id, next_seq) VALUES (1, 1);
CREATE TABLE queue_segments (
  first_seq bigint PRIMARY KEY,
  event_count integer NOT NULL,
  received_at bigint NOT NULL,
  data_set_id text NOT NULL,
  key_id text NOT NULL,
  request_id text NOT NULL,
  policy_version integer NOT NULL,
  part smallint NOT NULL,
  raw boolean NOT NULL,
  events text NOT NULL,
  metas text
);
CREATE INDEX queue_segments_part ON queue_segments (part, first_seq);
DO $$ BEGIN
  ALTER TABLE queue_segments ALTER COLUMN events SET COMPRESSION lz4;
EXCEPTION WHEN OTHERS THEN NULL;
END $$;

-- Merged view, identities, analytics: the same tables as view.db and ingest-stats.db.
CREATE TABLE view_records (
  data_set_id text NOT NULL,
  record_key text NOT NULL,
  event_id text,
  first_seq bigint NOT NULL,
  last_seq bigint NOT NULL,
  first_received_at bigint NOT NULL,
  last_received_at bigint NOT NULL,
  merged_count integer NOT NULL,
  identity_key text,
  measurement_only boolean NOT NULL,
  event text NOT NULL,
  PRIMARY KEY (data_set_id, record_key)
);
CREATE INDEX view_records_export ON view_records (data_set_id, first_seq);
CREATE TABLE identity_nodes (
  data_set_id text NOT NULL,
  identity_key text NOT NULL,
  parent text,
  created_seq bigint NOT NULL,
  event_count integer NOT NULL,
  identifier_count integer NOT NULL,
  PRIMARY KEY (data_set_id, identity_key)
);
CREATE INDEX identity_nodes_parent ON identity_nodes (data_set_id, parent) WHERE parent IS NOT NULL;
CREATE TABLE identity_identifiers (
  data_set_id text NOT NULL,
  identifier text NOT NULL,
  identity_key text NOT NULL,
  PRIMARY KEY (data_set_id, identifier)
);
CREATE INDEX identity_identifiers_key ON identity_identifiers (data_set_id, identity_key);
CREATE TABLE view_counters (
  data_set_id text NOT NULL,
  hour bigint NOT NULL,
  name text NOT NULL,
  n bigint NOT NULL,
  PRIMARY KEY (data_set_id, hour, name)
);
CREATE TABLE consumer_offsets (consumer text PRIMARY KEY, next_seq bigint NOT NULL);
CREATE TABLE consumer_heartbeats (consumer text PRIMARY KEY, pid integer NOT NULL, at bigint NOT NULL);
CREATE TABLE ingest_counters (
  data_set_id text NOT NULL,
  hour bigint NOT NULL,
  name text NOT NULL,
  n bigint NOT NULL,
  PRIMARY KEY (data_set_id, hour, name)
);

-- Worker membership and partition leases (several \`worker\` processes share the queue).
CREATE TABLE consumer_workers (worker_id text PRIMARY KEY, host text NOT NULL, pid integer NOT NULL, seen_at bigint NOT NULL);
CREATE TABLE consumer_leases (part integer PRIMARY KEY, owner text, expires_at bigint NOT NULL);
INSERT INTO consumer_leases (part, owner, expires_at) SELECT g, NULL, 0 FROM generate_series(0, ${QUEUE_PARTITIONS - 1}) g;

-- Cluster-wide rate limits: one row per data set, the authoritative buckets every node leases
-- tokens from. UNLOGGED: no WAL, so a lease costs no fsync; after a database crash the buckets
-- start full again, which admits at most one extra burst.
CREATE UNLOGGED TABLE rate_buckets (
  data_set_id text PRIMARY KEY,
  sustained double precision NOT NULL,
  events double precision NOT NULL,
  refilled_at bigint NOT NULL,
  second bigint NOT NULL,
  in_second integer NOT NULL
);

-- The arithmetic of rate-limit/data-set-buckets.ts, on the database's clock, in one round trip:
-- refill, then try \`want\` and fall back to \`need\`; all or nothing.
CREATE FUNCTION rl_take(p_ds text, p_rps double precision, p_burst double precision, p_burst_s double precision,
                        p_eps double precision, p_need_r integer, p_need_e integer, p_want_r integer, p_want_e integer)
RETURNS TABLE (o_ok boolean, o_granted_r integer, o_granted_e integer, o_now_ms bigint, o_limit text,
               o_retry_ms double precision, o_sustained double precision, o_events double precision, o_in_second integer)
LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint := floor(extract(epoch from clock_timestamp()) * 1000);
  sec bigint := floor(extract(epoch from clock_timestamp()));
  cap_s double precision := greatest(p_rps, (p_burst - p_rps) * p_burst_s);
  cap_e double precision := greatest(p_eps, 1000);
  b rate_buckets%ROWTYPE;
  elapsed double precision;
  r integer;
  e integer;
  attempt integer;
BEGIN
  sec := floor(now_ms / 1000.0);
  INSERT INTO rate_buckets (data_set_id, sustained, events, refilled_at, second, in_second)
    VALUES (p_ds, cap_s, cap_e, now_ms, sec, 0) ON CONFLICT (data_set_id) DO NOTHING;
  SELECT * INTO b FROM rate_buckets WHERE data_set_id = p_ds FOR UPDATE;
  elapsed := greatest(0, now_ms - b.refilled_at) / 1000.0;
  b.refilled_at := greatest(b.refilled_at, now_ms);
  b.sustained := least(cap_s, b.sustained + elapsed * p_rps);
  b.events := least(cap_e, b.events + elapsed * p_eps);
  IF sec <> b.second THEN b.second := sec; b.in_second := 0; END IF;
  FOR attempt IN 1..2 LOOP
    IF attempt = 1 THEN r := p_want_r; e := p_want_e; ELSE r := p_need_r; e := p_need_e; END IF;
    o_ok := true; o_limit := NULL; o_retry_ms := NULL;
    IF r > 0 THEN
      IF b.in_second + r > p_burst THEN
        o_ok := false; o_limit := 'burst'; o_retry_ms := (b.second + 1) * 1000 - now_ms;
      ELSIF b.sustained < r THEN
        o_ok := false; o_limit := 'requests'; o_retry_ms := (r - b.sustained) / p_rps * 1000;
      END IF;
    END IF;
    IF o_ok AND e > 0 AND b.events < e THEN
      o_ok := false; o_limit := 'events'; o_retry_ms := (e - b.events) / p_eps * 1000;
    END IF;
    EXIT WHEN o_ok OR (p_want_r = p_need_r AND p_want_e = p_need_e);
  END LOOP;
  IF o_ok THEN
    b.in_second := b.in_second + r; b.sustained := b.sustained - r; b.events := b.events - e;
    o_granted_r := r; o_granted_e := e;
  ELSE
    o_granted_r := 0; o_granted_e := 0;
  END IF;
  UPDATE rate_buckets SET sustained = b.sustained, events = b.events, refilled_at = b.refilled_at,
    second = b.second, in_second = b.in_second WHERE data_set_id = p_ds;
  o_now_ms := now_ms; o_sustained := b.sustained; o_events := b.events; o_in_second := b.in_second;
  RETURN NEXT;
END $$;

-- Unused tokens of an expired lease go back; requests leased in an earlier second no longer count
-- against this one.
CREATE FUNCTION rl_give_back(p_ds text, p_rps double precision, p_burst double precision, p_burst_s double precision,
                             p_eps double precision, p_r integer, p_e integer, p_second bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  now_ms bigint := floor(extract(epoch from clock_timestamp()) * 1000);
  sec bigint;
  cap_s double precision := greatest(p_rps, (p_burst - p_rps) * p_burst_s);
  cap_e double precision := greatest(p_eps, 1000);
  b rate_buckets%ROWTYPE;
  elapsed double precision;
BEGIN
  sec := floor(now_ms / 1000.0);
  SELECT * INTO b FROM rate_buckets WHERE data_set_id = p_ds FOR UPDATE;
  IF NOT FOUND THEN RETURN; END IF;
  elapsed := greatest(0, now_ms - b.refilled_at) / 1000.0;
  b.refilled_at := greatest(b.refilled_at, now_ms);
  b.sustained := least(cap_s, b.sustained + elapsed * p_rps + p_r);
  b.events := least(cap_e, b.events + elapsed * p_eps + p_e);
  IF sec <> b.second THEN b.second := sec; b.in_second := 0; END IF;
  IF p_second = b.second THEN b.in_second := greatest(0, b.in_second - p_r); END IF;
  UPDATE rate_buckets SET sustained = b.sustained, events = b.events, refilled_at = b.refilled_at,
    second = b.second, in_second = b.in_second WHERE data_set_id = p_ds;
END $$;
`;

// Accepted events per data set and hour, added by each queue commit (postgres-event-queue.ts), so
// that `stats` counts exactly what was queued. Filled from the segments still held; the row lock
// on queue_head keeps commits out while it is filled.
const acceptedCounts = `
SELECT next_seq FROM queue_head WHERE id = 1 FOR UPDATE;
CREATE TABLE queue_accepted (
  data_set_id text NOT NULL,
  hour bigint NOT NULL,
  n bigint NOT NULL,
  PRIMARY KEY (data_set_id, hour)
);
INSERT INTO queue_accepted (data_set_id, hour, n)
  SELECT data_set_id, received_at - received_at % 3600000, SUM(event_count) FROM queue_segments GROUP BY 1, 2;
`;

// Issue 23, the data lifecycle: the same tables as lifecycle.db of the embedded profile
// (lifecycle/sqlite-lifecycle-store.ts), and the index view retention reads by data set and age.
const lifecycleTables = `
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

// Issue 29: digests of the event ids a deletion request deleted (`events get` says so).
const deletedEvents = `
CREATE TABLE deleted_events (
  data_set_id text NOT NULL,
  event_digest text NOT NULL,
  request_id bigint NOT NULL,
  PRIMARY KEY (data_set_id, event_digest)
);
`;

// Issue 30 point 4, the sharded layout on PostgreSQL (consumer/DESIGN.md "The sharded layout on
// PostgreSQL"): the layout, fixed when the view is first consumed; the identity stage's row per
// record; counters per record shard (shards of one data set commit concurrently and must not meet on
// a row; reads sum them); the lifecycle's fence on each part's offset row (merged-view/view-fence.ts).
const shardedLayout = `
CREATE TABLE view_layout (id integer PRIMARY KEY CHECK (id = 1), kind text NOT NULL, shards integer NOT NULL);
CREATE TABLE view_record_identities (
  data_set_id text NOT NULL,
  record_key text NOT NULL,
  first_received_at bigint NOT NULL,
  identity_key text,
  PRIMARY KEY (data_set_id, record_key)
);
ALTER TABLE view_counters ADD COLUMN shard integer NOT NULL DEFAULT 0;
ALTER TABLE view_counters DROP CONSTRAINT view_counters_pkey;
ALTER TABLE view_counters ADD PRIMARY KEY (data_set_id, hour, name, shard);
ALTER TABLE consumer_offsets ADD COLUMN fence_seq bigint, ADD COLUMN fence_holder bigint;
`;

export const MIGRATIONS: readonly Migration[] = [
  { version: 1, name: 'initial: control plane, queue, merged view, leases, rate limits', sql: initial },
  // Issue 21: the fingerprint of the master key the control plane's secrets are sealed with.
  { version: 2, name: 'master key fingerprint', sql: 'ALTER TABLE control_meta ADD COLUMN master_key_fingerprint text;' },
  { version: 3, name: 'accepted counts per data set and hour, written by the queue commit', sql: acceptedCounts },
  // Issue 23: deletion requests, suppressions, the audit log, and the index view retention reads.
  { version: 4, name: 'data lifecycle: deletion requests, suppressions, view expiry index', sql: lifecycleTables },
  // Issue 29: which event ids a deletion request deleted, as keyed digests (`events get` says so).
  { version: 5, name: 'data lifecycle: digests of deleted event ids', sql: deletedEvents },
  // Issue 30: one data set's records spread over several lanes (record shards) and an identity part.
  { version: 6, name: 'merged view: sharded layout, counters per shard, fences', sql: shardedLayout },
  // Issue 30: a data set's view generation, bumped by the erasers; workers' hot links check it (merged-view/postgres-view-generation.ts).
  { version: 7, name: 'merged view: generations per data set', sql: 'CREATE TABLE view_generations (data_set_id text PRIMARY KEY, n bigint NOT NULL);' },
  // Issue 30: the merge window a segment was accepted under, so that every lane decides a re-send alike (queue/event-queue.ts).
  { version: 8, name: 'queue: merge window per segment', sql: 'ALTER TABLE queue_segments ADD COLUMN merge_window_ms bigint;' },
  // Issue 30: the segments queued before version 8 (no merge window), which workers stamp at their start (queue/postgres-legacy-windows.ts).
  { version: 9, name: 'queue: index of segments without a merge window', sql: 'CREATE INDEX queue_segments_unstamped ON queue_segments (first_seq) WHERE merge_window_ms IS NULL;' },
];
