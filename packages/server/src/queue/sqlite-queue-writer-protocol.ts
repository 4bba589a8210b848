/** Messages between SqliteEventQueue (serving thread) and its writer thread. */
export interface SegmentInput {
  readonly count: number;
  readonly receivedAt: number;
  readonly dataSetId: string;
  readonly keyId: string;
  readonly requestId: string;
  readonly policyVersion: number;
  /** The accepted events, serialized once on the serving thread as a JSON array. */
  readonly events: string;
  readonly metas: string | null;
}

export interface WriterRequest {
  readonly id: number;
  readonly segments: readonly SegmentInput[];
}

export type WriterReply =
  | { readonly id: number; readonly ok: true; readonly firstSeqs: readonly number[]; readonly durationMs: number }
  | { readonly id: number; readonly ok: false; readonly message: string };
