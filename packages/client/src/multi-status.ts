/**
 * Reading a multi-status body (a 207, or a 400 in that shape: `{accepted, rejected, errors: [{index,
 * event_id, error}]}`) against the request it answers, before any event is reported `accepted` on
 * its word.
 *
 * The spec says the events of a 207 that `errors` does not list were durably queued, and that only
 * the listed ones are to be fixed and resent. The client believes that only when the body adds up:
 * - `accepted` and `rejected` are whole numbers from 0, and `accepted + rejected` is the number of
 *   events sent in the request; a 400 accepts none (`accepted` is 0);
 * - `errors` has `rejected` entries, each an object whose `index` is a whole number below the number
 *   of events sent, no index listed twice;
 * - an entry's `event_id`, when it is a string, is the id the client sent at that index (null, or
 *   absent, claims nothing: the service reports null for an event without a string id).
 *
 * A body that does not add up (a broken proxy, a server bug, a response meant for another request)
 * cannot say which events were stored. Then no event of the request is reported accepted: the
 * entries that still clearly reject an event (a valid index listed once, its event_id the one sent
 * or null) keep that event `rejected` (if the claim were wrong, fixing and resending it is harmless:
 * events merge by id); every other event of the request is `undeliverable` with
 * `INCONSISTENT_RESPONSE`, whose message says what did not add up. They are not resent
 * automatically: a service that answers this way would likely answer the same again; the caller
 * resends them (ids kept) when it chooses.
 *
 * A 200 is held to the same rule (readSuccess): the spec's success body is `{accepted}` with
 * `accepted` the number of events sent. A 200 that does not say so (a wrong count, no body, a proxy's
 * or captive portal's HTML page answered 200) is no proof the service stored the events; believing
 * its status alone would report them accepted and lose them silently. Its events are undeliverable
 * with INCONSISTENT_RESPONSE, not resent automatically, as for a 207.
 *
 * Messages name counts, positions and field names, never an id or anything else the body carried.
 */
import { isPlainObject } from './prepare-events.js';

/** How many problems a message names before `and N more`. */
const MAX_PROBLEMS_NAMED = 3;

export interface MultiStatusReading {
  /** Positions in the request (0-based) that the body rejects, with the service's error text. */
  readonly rejected: Map<number, string>;
  /**
   * Undefined when the body adds up (every position not in `rejected` was accepted); otherwise what
   * did not add up, and `rejected` holds only the entries that still clearly reject their event.
   */
  readonly problem: string | undefined;
}

const isCount = (value: unknown): value is number => typeof value === 'number' && Number.isInteger(value) && value >= 0;

/**
 * Reads a multi-status body of `status` (207 or 400) against the ids sent, by position in the
 * request (`sentIds[k]`: the id of the request's k-th event, or null when it had none).
 */
export function readMultiStatus(status: number, body: Record<string, unknown>, sentIds: readonly (string | null)[]): MultiStatusReading {
  const n = sentIds.length;
  const problems: string[] = [];
  const rejected = new Map<number, string>();
  const errors = body.errors;
  if (!Array.isArray(errors)) {
    return { rejected, problem: `${status} without an errors list` };
  }
  const { accepted, rejected: rejectedCount } = body;
  if (!isCount(accepted)) problems.push('accepted is missing or not a whole number');
  if (!isCount(rejectedCount)) problems.push('rejected is missing or not a whole number');
  if (isCount(accepted) && isCount(rejectedCount) && accepted + rejectedCount !== n) {
    problems.push(`accepted ${accepted} + rejected ${rejectedCount} is not the ${n} event${n === 1 ? '' : 's'} sent`);
  }
  if (status === 400 && isCount(accepted) && accepted !== 0) problems.push(`a 400 accepts no event, yet accepted is ${accepted}`);
  if (isCount(rejectedCount) && errors.length !== rejectedCount) problems.push(`rejected is ${rejectedCount} but errors lists ${errors.length}`);

  /** Where each index was first listed, to name both entries of a duplicate. */
  const firstListed = new Map<number, number>();
  const duplicated = new Set<number>();
  const clear = new Map<number, string>();
  errors.forEach((entry: unknown, k: number) => {
    if (!isPlainObject(entry)) {
      problems.push(`errors[${k}] is not an object`);
      return;
    }
    const index = entry.index;
    if (!(typeof index === 'number' && Number.isInteger(index) && index >= 0 && index < n)) {
      problems.push(`errors[${k}].index is not a whole number from 0 to ${n - 1}`);
      return;
    }
    const first = firstListed.get(index);
    if (first !== undefined) {
      if (!duplicated.has(index)) problems.push(`index ${index} is listed twice (errors[${first}] and errors[${k}])`);
      duplicated.add(index);
      return;
    }
    firstListed.set(index, k);
    const eventId = entry.event_id;
    if (eventId !== null && eventId !== undefined && typeof eventId !== 'string') {
      problems.push(`errors[${k}].event_id is neither a string nor null`);
      return;
    }
    if (typeof eventId === 'string' && eventId !== sentIds[index]) {
      problems.push(`errors[${k}].event_id is not the id of the event sent at index ${index}`);
      return;
    }
    clear.set(index, String(entry.error));
  });
  for (const [index, error] of clear) if (!duplicated.has(index)) rejected.set(index, error);
  if (problems.length === 0) return { rejected, problem: undefined };
  const named = problems.slice(0, MAX_PROBLEMS_NAMED).join('; ');
  const more = problems.length - MAX_PROBLEMS_NAMED;
  return { rejected, problem: more > 0 ? `${named}; and ${more} more` : named };
}

/**
 * Reads a 200's body against the number of events sent: undefined when it says every one of them
 * was accepted (`accepted` is that number), otherwise what did not add up. `body` is the response
 * text parsed as a JSON object (undefined when it is not one), `text` the raw text, only looked at
 * to tell an empty body apart; neither is ever quoted. A few comparisons: cheap on the hot path.
 */
export function readSuccess(text: string, body: Record<string, unknown> | undefined, sent: number): string | undefined {
  if (body === undefined) return text === '' ? 'the body is empty' : 'the body is not a JSON object';
  const { accepted } = body;
  if (!isCount(accepted)) return 'accepted is missing or not a whole number';
  if (accepted !== sent) return `accepted ${accepted} is not the ${sent} event${sent === 1 ? '' : 's'} sent`;
  return undefined;
}
