/**
 * Live figures for the operator console (issue 10): the last hour in memory, per node.
 *
 *   serving process                                         process that owns the admin port
 *   LiveRecorder ── every second: LiveDelta ──(IPC with --workers N, a call otherwise)──▶ LiveStore
 *
 * Three parts, one file each (issue 19 split the former 588-line module along them):
 * - live-recorder.ts: `LiveRecorder`, on the hot path of every serving process (as its
 *   `IngestObserver`) and once a second diffing the process's Prometheus metrics;
 * - event-display.ts: the masking of the test environment's events for display (accepted and
 *   rejected), done in the serving process before anything is kept;
 * - live-store.ts: `LiveStore`, the ring buffers in the process with the admin port, which the
 *   console API (admin/console-api.ts) queries.
 * live-delta.ts holds what crosses between them (`LiveDelta`) and the bounds both sides keep;
 * console-deletions.ts, in the process with the admin port, follows the deletion requests and
 * takes what they cover out of the store's recent rejections and list of test events.
 *
 * Everything is lost on restart by design: the durable figures (events today, acceptance rate, match
 * quality, hourly history) come from ingest-stats.db and view.db through the StatsReader.
 * This module only re-exports, so that importers name one place for the console's live figures.
 */
export { LIVE_WINDOW_MS, type CumulativeHistogram, type DataSetDelta, type LiveDelta, type RejectionEntry, type TestEventEntry } from './live-delta.js';
export { LiveRecorder, startLiveLoop } from './live-recorder.js';
export { eventForDisplay, rejectedEventForDisplay } from './event-display.js';
export { LiveStore, quantileMs, statusClass, type DataSetLive } from './live-store.js';
