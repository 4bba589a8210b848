/**
 * Background batching for Client.track(): events are prepared (hashed, given their data set and id,
 * validated, serialized) when tracked, held in memory, and sent in batches by one background loop,
 * the way senders used to analytics libraries expect.
 *
 * A batch leaves when the events waiting reach `flushAt` events or `flushBytes` serialized bytes,
 * when the oldest has waited `flushIntervalMs`, on flush(), and on close(). Batches go one at a
 * time, in tracking order; each is one Client send (packed into requests, retried as send() does).
 *
 * Invariants and hazards:
 * - Memory is bounded: the events held (waiting, plus the batch being sent and retried) never exceed
 *   `maxQueuedEvents` events nor `maxQueuedBytes` serialized bytes. Overflow policy: drop the
 *   newest. track() of an event that does not fit returns `dropped`, calls onDrop and counts it in
 *   stats().dropped; nothing already held is discarded. A service that is down therefore costs the
 *   newest events once the retries of the batch in flight fill the room, never unbounded memory.
 * - An event is prepared exactly once, at track(): its bytes are what is signed and sent, and its
 *   id (generated when absent) is what a retry resends, so retries never duplicate it. Only those
 *   bytes are held (the heap grows by about 1.5 times their length: scripts/track-memory.ts); the event object a batch's
 *   results carry is parsed back from them when the batch leaves.
 * - A timer is armed only while events wait, and it keeps the process alive until they are sent
 *   (a script that tracks and returns still delivers); close() flushes and releases everything.
 * - flush() resolves once every event tracked before the call has settled (accepted, rejected or
 *   undeliverable), even while tracking continues.
 * - A callback that throws does not stop the loop: its error is rethrown outside it (an uncaught
 *   exception, as from an event handler).
 */
import type { EcapiEvent } from './event-types.generated.js';
import { planRequests, type PackLimits } from './pack.js';
import type { PreparedEvents } from './prepare-events.js';
import type { Rejection } from './send-errors.js';
import type { SendResult } from './send-result.js';

export interface BatchingOptions {
  /** A batch leaves once this many events wait (default 1,000: one full request). */
  readonly flushAt?: number;
  /** … or once the events waiting reach this many serialized bytes (default 1,048,576: one full request). */
  readonly flushBytes?: number;
  /** … or once the oldest waiting event has waited this long, in ms (default 1,000). */
  readonly flushIntervalMs?: number;
  /** Events held at most, waiting or being sent (default 10,000); past it track() drops the newest. */
  readonly maxQueuedEvents?: number;
  /** Serialized bytes held at most, waiting or being sent (default 16 MiB); past it track() drops the newest. */
  readonly maxQueuedBytes?: number;
  /** Called for each event track() drops because the queue is full. */
  readonly onDrop?: (drop: DroppedEvent) => void;
  /** Called after each background batch settles, with its result (results[i].index is the position in the batch). */
  readonly onBatch?: (result: SendResult) => void;
}

export interface DroppedEvent {
  readonly reason: 'queue-full';
  /** The event as prepared (hashed, with its id): track it again later, it cannot duplicate. */
  readonly event: EcapiEvent;
  readonly id: string | null;
  readonly message: string;
}

/** What track() did with the event, synchronously. */
export type TrackResult =
  /** Held for the next batch. */
  | { readonly status: 'queued'; readonly id: string | null }
  /** Failed local validation (or hashing): never queued; fix it and track it again. */
  | { readonly status: 'rejected'; readonly id: string | null; readonly error: Rejection }
  /** The queue was full (maxQueuedEvents / maxQueuedBytes): not queued, onDrop was called. */
  | { readonly status: 'dropped'; readonly id: string | null; readonly message: string };

export interface TrackStats {
  /** track() calls. */
  readonly tracked: number;
  /** Events held now (waiting, or in the batch being sent) and their serialized bytes. */
  readonly queued: number;
  readonly queuedBytes: number;
  /** Outcomes so far of tracked events: rejected counts local and service rejections. */
  readonly accepted: number;
  readonly rejected: number;
  readonly undeliverable: number;
  readonly dropped: number;
  /** Background batches sent. */
  readonly batches: number;
}

/** One tracked event, prepared: its serialized form only (the object is parsed back for its batch's results). */
interface Held {
  readonly seq: number;
  readonly json: string;
  readonly bytes: number;
  readonly id: string | null;
}

/** The prepared form of one event (Client runs prepareEvents on it). */
export type PrepareOne = (event: unknown) => { ok: true; json: string; event: EcapiEvent; id: string | null } | { ok: false; id: string | null; error: Rejection };

export const DEFAULT_BATCHING = {
  flushAt: 1000,
  flushBytes: 1_048_576,
  flushIntervalMs: 1000,
  maxQueuedEvents: 10_000,
  maxQueuedBytes: 16 * 1024 * 1024,
} as const;

function positive(name: string, value: number | undefined, fallback: number): number {
  const v = value ?? fallback;
  if (!Number.isFinite(v) || v <= 0) throw new TypeError(`Client: ${name} must be a positive number`);
  return v;
}

/** A user callback's error, thrown again outside the loop that called it (an uncaught exception, as from an event handler), so the loop goes on. */
const rethrowOutside = (error: unknown) => queueMicrotask(() => {
  throw error;
});

/** Calls a user callback; an error it throws is rethrown outside (rethrowOutside), never into the caller. */
export function notify<T>(callback: ((value: T) => void) | undefined, value: () => T): void {
  if (!callback) return;
  try {
    callback(value());
  } catch (error) {
    rethrowOutside(error);
  }
}

export class Batcher {
  readonly #flushAt: number;
  readonly #flushBytes: number;
  readonly #intervalMs: number;
  readonly #maxEvents: number;
  readonly #maxBytes: number;
  readonly #options: BatchingOptions;
  readonly #limits: PackLimits;
  readonly #prepare: PrepareOne;
  readonly #send: (prep: PreparedEvents, n: number) => Promise<SendResult>;

  #waiting: Held[] = [];
  #waitingBytes = 0;
  /** Held = waiting + the batch in flight. */
  #heldEvents = 0;
  #heldBytes = 0;
  #seq = 0;
  /** Every event with seq <= this goes in the next batches, full or not (timer, flush()). */
  #drainUntil = 0;
  /** Every event with seq <= this has settled. */
  #settled = 0;
  #timer: NodeJS.Timeout | undefined;
  #loop: Promise<void> | undefined;
  #waiters: { seq: number; resolve: () => void }[] = [];
  #stats = { tracked: 0, accepted: 0, rejected: 0, undeliverable: 0, dropped: 0, batches: 0 };

  constructor(options: BatchingOptions, limits: PackLimits, prepare: PrepareOne, send: (prep: PreparedEvents, n: number) => Promise<SendResult>) {
    this.#options = options;
    this.#limits = limits;
    this.#flushAt = Math.floor(positive('flushAt', options.flushAt, DEFAULT_BATCHING.flushAt));
    this.#flushBytes = positive('flushBytes', options.flushBytes, DEFAULT_BATCHING.flushBytes);
    this.#intervalMs = positive('flushIntervalMs', options.flushIntervalMs, DEFAULT_BATCHING.flushIntervalMs);
    this.#maxEvents = Math.floor(positive('maxQueuedEvents', options.maxQueuedEvents, DEFAULT_BATCHING.maxQueuedEvents));
    this.#maxBytes = positive('maxQueuedBytes', options.maxQueuedBytes, DEFAULT_BATCHING.maxQueuedBytes);
    this.#prepare = prepare;
    this.#send = send;
  }

  stats(): TrackStats {
    return { ...this.#stats, queued: this.#heldEvents, queuedBytes: this.#heldBytes };
  }

  track(input: unknown): TrackResult {
    this.#stats.tracked++;
    const p = this.#prepare(input);
    if (!p.ok) {
      this.#stats.rejected++;
      return { status: 'rejected', id: p.id, error: p.error };
    }
    const bytes = Buffer.byteLength(p.json, 'utf8');
    if (this.#heldEvents + 1 > this.#maxEvents || this.#heldBytes + bytes > this.#maxBytes) {
      this.#stats.dropped++;
      const message = `queue full: ${this.#heldEvents} events, ${this.#heldBytes} bytes held (maxQueuedEvents ${this.#maxEvents}, maxQueuedBytes ${this.#maxBytes}); the newest event is dropped`;
      notify(this.#options.onDrop, () => ({ reason: 'queue-full' as const, event: p.event, id: p.id, message }));
      return { status: 'dropped', id: p.id, message };
    }
    const held: Held = { seq: ++this.#seq, json: p.json, bytes, id: p.id };
    this.#waiting.push(held);
    this.#waitingBytes += bytes;
    this.#heldEvents++;
    this.#heldBytes += bytes;
    if (this.#waiting.length >= this.#flushAt || this.#waitingBytes >= this.#flushBytes) this.#kick();
    else this.#armTimer();
    return { status: 'queued', id: p.id };
  }

  /** Resolves once every event tracked before the call has settled. */
  async flush(): Promise<TrackStats> {
    const target = this.#seq;
    this.#drainUntil = Math.max(this.#drainUntil, target);
    if (this.#settled < target) {
      const done = new Promise<void>((resolve) => this.#waiters.push({ seq: target, resolve }));
      this.#kick();
      await done;
    }
    return this.stats();
  }

  /** Stops the timer (after flush(): nothing is waiting). */
  stop(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #armTimer(): void {
    if (this.#timer || this.#waiting.length === 0) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#drainUntil = Math.max(this.#drainUntil, this.#seq);
      this.#kick();
    }, this.#intervalMs);
  }

  #kick(): void {
    this.#loop ??= this.#run().finally(() => {
      this.#loop = undefined;
      // Events tracked while the last batch was settling.
      if (this.#due()) this.#kick();
      else this.#armTimer();
    });
  }

  #due(): boolean {
    const first = this.#waiting[0];
    if (first === undefined) return false;
    return first.seq <= this.#drainUntil || this.#waiting.length >= this.#flushAt || this.#waitingBytes >= this.#flushBytes;
  }

  async #run(): Promise<void> {
    while (this.#due()) {
      // One batch: up to flushAt events and flushBytes bytes, at least one event.
      let n = 0;
      let bytes = 0;
      while (n < this.#waiting.length && n < this.#flushAt && (n === 0 || bytes + this.#waiting[n]!.bytes <= this.#flushBytes)) {
        bytes += this.#waiting[n]!.bytes;
        n++;
      }
      const batch = this.#waiting.splice(0, n);
      this.#waitingBytes -= bytes;
      if (this.#waiting.length === 0) this.stop();
      const prep: PreparedEvents = {
        serialized: batch.map((h) => h.json),
        // Parsed back from the bytes that are sent: holding only the string keeps the heap near the bytes counted.
        prepared: batch.map((h) => JSON.parse(h.json) as EcapiEvent),
        ids: batch.map((h) => h.id),
        rejected: [],
        requests: planRequests(batch.map((h) => h.bytes), this.#limits).requests,
      };
      let result: SendResult | undefined;
      try {
        result = await this.#send(prep, batch.length);
      } catch (error) {
        rethrowOutside(error);
      }
      this.#heldEvents -= batch.length;
      this.#heldBytes -= bytes;
      this.#settled = batch[batch.length - 1]!.seq;
      this.#stats.batches++;
      if (result) {
        this.#stats.accepted += result.accepted;
        this.#stats.rejected += result.rejected;
        this.#stats.undeliverable += result.undeliverable;
        notify(this.#options.onBatch, () => result);
      } else {
        this.#stats.undeliverable += batch.length;
      }
      this.#wake();
    }
    this.#wake();
  }

  #wake(): void {
    // Every event up to the newest has settled when nothing waits and no batch is in flight.
    const settled = this.#waiting.length === 0 && this.#heldEvents === 0 ? this.#seq : this.#settled;
    this.#waiters = this.#waiters.filter((w) => {
      if (w.seq > settled) return true;
      w.resolve();
      return false;
    });
  }
}
