/**
 * Packing events into requests: pure functions over the byte lengths of the serialized events.
 *
 * A request body is `{"events":[e1,e2,…]}`: 11 bytes of `{"events":[`, 2 of `]}` and a comma between
 * events, so n events of s_i bytes take 12 + n + Σ s_i bytes. Events are packed greedily in input
 * order, each request as full as the limits (events and bytes) allow. For an order-preserving split
 * this is the fewest requests possible (a greedy prefix split is optimal for a monotone capacity
 * limit), and keeping order keeps "later event wins" merges predictable.
 *
 * An event too large for the wrapper but within the byte limit on its own is sent as a bare event
 * body (the single-event form), so the only events refused are those over the limit by themselves.
 */
import { MAX_BODY_BYTES, MAX_EVENTS_PER_REQUEST } from './protocol.js';

export const BATCH_OPEN = '{"events":[';
export const BATCH_CLOSE = ']}';
/** Bytes of the wrapper around the events, without the commas. */
export const WRAPPER_BYTES = BATCH_OPEN.length + BATCH_CLOSE.length;

export interface PackLimits {
  /** At most this many events per request (1..1000). */
  readonly maxEvents: number;
  /** At most this many body bytes per request (up to 1,048,576). */
  readonly maxBytes: number;
}

export const DEFAULT_PACK_LIMITS: PackLimits = { maxEvents: MAX_EVENTS_PER_REQUEST, maxBytes: MAX_BODY_BYTES };

export interface PlannedRequest {
  /** Positions (in the sizes array) of the events in this request, ascending. */
  readonly items: readonly number[];
  /** Body size in bytes. */
  readonly bytes: number;
  /** True when the body is one bare event rather than the `{"events":[…]}` wrapper. */
  readonly bare: boolean;
}

export interface PackPlan {
  readonly requests: PlannedRequest[];
  /** Positions of events that are over maxBytes even on their own. */
  readonly oversize: number[];
}

/** The body size of a wrapped batch of events with these sizes. */
export function batchBytes(sizes: readonly number[]): number {
  let total = WRAPPER_BYTES + Math.max(0, sizes.length - 1);
  for (const s of sizes) total += s;
  return total;
}

/** Validates and clamps limits to the wire contract. */
export function packLimits(options: { maxEvents?: number | undefined; maxBytes?: number | undefined } = {}): PackLimits {
  const maxEvents = options.maxEvents ?? MAX_EVENTS_PER_REQUEST;
  const maxBytes = options.maxBytes ?? MAX_BODY_BYTES;
  if (!Number.isInteger(maxEvents) || maxEvents < 1 || maxEvents > MAX_EVENTS_PER_REQUEST) {
    throw new RangeError(`maxEventsPerRequest must be an integer from 1 to ${MAX_EVENTS_PER_REQUEST}`);
  }
  if (!Number.isInteger(maxBytes) || maxBytes < WRAPPER_BYTES + 2 || maxBytes > MAX_BODY_BYTES) {
    throw new RangeError(`maxBodyBytes must be an integer from ${WRAPPER_BYTES + 2} to ${MAX_BODY_BYTES}`);
  }
  return { maxEvents, maxBytes };
}

/** Splits events of the given serialized byte sizes into requests; see the module comment. */
export function planRequests(sizes: readonly number[], limits: PackLimits = DEFAULT_PACK_LIMITS): PackPlan {
  const requests: PlannedRequest[] = [];
  const oversize: number[] = [];
  let items: number[] = [];
  let bytes = 0;
  const flush = () => {
    if (items.length > 0) requests.push({ items, bytes, bare: false });
    items = [];
    bytes = 0;
  };
  for (let i = 0; i < sizes.length; i++) {
    const size = sizes[i]!;
    if (WRAPPER_BYTES + size > limits.maxBytes) {
      // Does not fit any wrapper: alone as a bare event, or not at all.
      if (size > limits.maxBytes) {
        oversize.push(i);
        continue;
      }
      flush();
      requests.push({ items: [i], bytes: size, bare: true });
      continue;
    }
    const next = items.length === 0 ? WRAPPER_BYTES + size : bytes + 1 + size;
    if (items.length === limits.maxEvents || next > limits.maxBytes) {
      flush();
      items.push(i);
      bytes = WRAPPER_BYTES + size;
    } else {
      items.push(i);
      bytes = next;
    }
  }
  flush();
  return { requests, oversize };
}

/** The exact body bytes of a planned request, from the events' serialized JSON texts. */
export function buildBody(serialized: readonly string[], request: PlannedRequest): Buffer {
  if (request.bare) return Buffer.from(serialized[request.items[0]!]!, 'utf8');
  const parts: string[] = new Array(request.items.length);
  for (let k = 0; k < request.items.length; k++) parts[k] = serialized[request.items[k]!]!;
  return Buffer.from(BATCH_OPEN + parts.join(',') + BATCH_CLOSE, 'utf8');
}
