/** Messages between SqliteEventQueue (serving thread) and its writer thread. */
export interface SegmentInput {
  readonly count: number;
  readonly receivedAt: number;
  readonly dataSetId: string;
  readonly keyId: string;
  readonly requestId: string;
  readonly policyVersion: number;
  /**
   * The accepted events: a JSON array serialized on the serving thread (string, stored as TEXT), or
   * the request body exactly as received when nothing was rejected or changed (bytes, stored as a
   * BLOB and transferred, not copied, to the writer thread).
   */
  readonly events: string | Uint8Array;
  readonly metas: string | null;
}

export interface WriterRequest {
  readonly id: number;
  readonly segments: readonly SegmentInput[];
}

export type WriterReply =
  | { readonly id: number; readonly ok: true; readonly firstSeqs: readonly number[]; readonly durationMs: number }
  | { readonly id: number; readonly ok: false; readonly message: string };
