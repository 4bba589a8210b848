/**
 * The request path's report of per-event outcomes, for analytics (accepted vs rejected counts, and
 * rejections grouped by reason, per data set and hour). It receives counts and the spec's rejection
 * messages only, never an event. `record` runs on the serving thread: it must not block or do I/O
 * synchronously; implementations aggregate in memory and flush in the background.
 */
export interface IngestOutcomeRecorder {
  /**
   * One call per request that reached per-event validation and got its answer (200, 207, or the
   * all-failed 400). `rejections` holds the `errors[].error` messages of the response in their
   * stored form (validation/stored-reason.ts: sender-controlled names and values masked).
   */
  record(dataSetId: string, receivedAtMs: number, accepted: number, rejections: readonly string[]): void;
  close(): Promise<void>;
}
