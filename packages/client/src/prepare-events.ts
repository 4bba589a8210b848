/**
 * Preparing events for sending, without any I/O: hashing of plaintext identifiers, the client's
 * data set, ids, validation, serialization and the packing plan. Client.send() uses it; the CLI's
 * `send --dry-run` is this alone.
 *
 * Invariants and hazards:
 * - Each event is serialized exactly once, and those bytes are what is signed and sent: a second
 *   serialization could differ and break the signature.
 * - An event without an `id` gets a UUIDv7 here, before the first attempt, so every retry resends
 *   the same id and the service's merge by (data_set_id, id) makes retries harmless.
 * - Input may come from parsed JSON (the CLI), not only from typed callers: anything that is not an
 *   object is rejected locally, never thrown.
 * - An event rejected here keeps its input index: results stay in input order.
 */
import { EventErrors, MAX_BODY_BYTES } from './protocol.js';
import type { EcapiEvent } from './event-types.generated.js';
import { hashEvent, type HashOptions, type PlaintextEvent } from './hash-event.js';
import { NormalizationError } from './normalize.js';
import { packLimits, planRequests, type PackLimits, type PlannedRequest } from './pack.js';
import type { Rejection } from './send-errors.js';
import type { RejectedEvent } from './send-result.js';
import { uuidv7 } from './uuid.js';
import { validateEvent } from './validate.js';

/** Members the client fills in: `data_set_id` (the client's data set) and `id` (a UUIDv7). */
type ClientFilled = 'data_set_id' | 'id';
/**
 * An event as given to send(): an ECAPI 1.0 event whose `data_set_id` and `id` may be left out.
 * Closed like the schema: a misspelt member or event type does not compile.
 */
export type EventInput = Omit<EcapiEvent, ClientFilled> & Partial<Pick<EcapiEvent, ClientFilled>>;
/** The same with plaintext identifiers, for `hash: true` (hashEvent's input). */
export type PlaintextEventInput = Omit<PlaintextEvent, ClientFilled> & Partial<Pick<EcapiEvent, ClientFilled>>;

export interface PrepareOptions {
  /** The data set the events go to; filled in where an event has no data_set_id. */
  readonly dataSetId: string;
  /** Give events without an `id` a UUIDv7, so retries can never duplicate them (default true). */
  readonly generateIds?: boolean;
  /** Validate against the ECAPI 1.0 schema before sending (default true). */
  readonly validate?: boolean;
  /** Hash plaintext identifiers first (hashEvent); `true` or hashing options (default false). */
  readonly hash?: boolean | HashOptions;
  /** Limits per request (default and maximum: 1,000 events, 1,048,576 bytes). */
  readonly maxEventsPerRequest?: number;
  readonly maxBodyBytes?: number;
}

/** The outcome of preparing a batch of events: serialized events, local rejections, the request plan. */
export interface PreparedEvents {
  /** Serialized JSON of each event, by input index (undefined for events rejected locally). */
  readonly serialized: (string | undefined)[];
  /** The prepared event objects, by input index. */
  readonly prepared: EcapiEvent[];
  readonly ids: (string | null)[];
  /** Events that failed preparation, with the reason. */
  readonly rejected: RejectedEvent[];
  /** Requests to send: `items` are input indexes. */
  readonly requests: PlannedRequest[];
}

/** A JSON object (not null, not an array). */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Prepares events for sending without any I/O: hashing, data set, ids, validation, serialization
 * (each event exactly once) and the packing plan. `send()` uses it; `--dry-run` is this alone.
 */
export function prepareEvents(events: ReadonlyArray<EventInput | PlaintextEventInput>, options: PrepareOptions): PreparedEvents {
  const limits: PackLimits = packLimits({ maxEvents: options.maxEventsPerRequest, maxBytes: options.maxBodyBytes });
  const hashOptions: HashOptions | undefined = options.hash === true ? {} : options.hash === false || options.hash === undefined ? undefined : options.hash;
  const generateIds = options.generateIds ?? true;
  const validate = options.validate ?? true;
  const n = events.length;
  const serialized: (string | undefined)[] = new Array(n);
  const prepared: EcapiEvent[] = new Array(n);
  const ids: (string | null)[] = new Array(n);
  const rejected: RejectedEvent[] = [];
  const okIndexes: number[] = [];
  const sizes: number[] = [];
  const reject = (index: number, error: Rejection, event: unknown) => {
    rejected.push({ status: 'rejected', index, id: ids[index] ?? null, error, httpStatus: null, requestId: undefined, event: event as EcapiEvent });
  };
  for (let i = 0; i < n; i++) {
    // Typed callers cannot pass a non-object; parsed JSON (the CLI, casts) can, and is checked here.
    const input: unknown = events[i];
    ids[i] = isPlainObject(input) && typeof input.id === 'string' ? input.id : null;
    prepared[i] = input as EcapiEvent;
    if (!isPlainObject(input)) {
      reject(i, { code: 'SCHEMA', message: EventErrors.SCHEMA.message('event must be a JSON object') }, input);
      continue;
    }
    let event: Record<string, unknown> = input;
    try {
      if (hashOptions) event = hashEvent(event as PlaintextEvent, hashOptions) as unknown as Record<string, unknown>;
    } catch (error) {
      if (!(error instanceof NormalizationError)) throw error;
      reject(i, { code: 'NORMALIZATION', message: `normalization failed: ${error.message}` }, event);
      continue;
    }
    if (event.data_set_id === undefined) event = { data_set_id: options.dataSetId, ...event };
    if (event.id === undefined && generateIds) {
      event = { ...event, id: uuidv7() };
    }
    ids[i] = typeof event.id === 'string' ? event.id : null;
    prepared[i] = event as unknown as EcapiEvent;
    if (event.data_set_id !== options.dataSetId && typeof event.data_set_id === 'string') {
      reject(i, EventErrors.INVALID_FIELD.error('data_set_id', `must equal the client's data set "${options.dataSetId}" (X-Service-Data-Set)`), event);
      continue;
    }
    if (validate) {
      const problem = validateEvent(event);
      if (problem !== undefined) {
        reject(i, problem, event);
        continue;
      }
    }
    const json = JSON.stringify(event);
    serialized[i] = json;
    okIndexes.push(i);
    sizes.push(Buffer.byteLength(json, 'utf8'));
  }
  const plan = planRequests(sizes, limits);
  for (const position of plan.oversize) {
    const index = okIndexes[position]!;
    serialized[index] = undefined;
    const limit = limits.maxBytes < MAX_BODY_BYTES ? `the maxBodyBytes limit of ${limits.maxBytes} bytes` : `the service's limit of ${MAX_BODY_BYTES} bytes (1 MB) per request`;
    const message = `event is ${sizes[position]} bytes serialized, over ${limit} on its own: no request can carry it; make it smaller`;
    reject(index, { code: 'EVENT_TOO_LARGE', message }, prepared[index]);
  }
  rejected.sort((a, b) => a.index - b.index);
  const requests = plan.requests.map((r) => ({ ...r, items: r.items.map((p) => okIndexes[p]!) }));
  return { serialized, prepared, ids, rejected, requests };
}
