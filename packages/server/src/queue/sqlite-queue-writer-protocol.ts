/** Messages between SqliteEventQueue (serving thread) and its writer thread. */
export interface SegmentInput {
  readonly count: number;
  readonly receivedAt: number;
  readonly dataSetId: string;
  readonly keyId: string;
  readonly requestId: string;
  readonly policyVersion: number;
  readonly mergeWindowMs: number;
  /**
   * The accepted events: a JSON array serialized on the serving thread (string, stored as TEXT), or
   * the request body exactly as received when nothing was rejected or changed (bytes, stored as a
   * BLOB and transferred, not copied, to the writer thread).
   */
  readonly events: string | Uint8Array;
  readonly metas: string | null;
}

/** One request's segment, or (without a segment) a probe: an empty transaction that tests the store. */
export interface WriterRequest {
  readonly id: number;
  readonly segment?: SegmentInput;
}

/**
 * What the serving thread posts: the requests appended during one turn of its event loop (one
 * postMessage for all of them), or, once nothing is pending, the request to close.
 */
export type WriterMessage = readonly WriterRequest[] | { readonly close: true };

/** The outcome of one commit, for every request it held, in the order they were written. */
export type WriterReply =
  | { readonly ok: true; readonly ids: readonly number[]; readonly firstSeqs: readonly number[]; readonly durationMs: number }
  | { readonly ok: false; readonly ids: readonly number[]; readonly message: string };
