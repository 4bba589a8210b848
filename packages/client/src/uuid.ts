/**
 * UUIDv7 (RFC 9562) ids for events that have none, from the `uuid` package: 48-bit unix
 * milliseconds, then a counter that keeps ids generated within one millisecond in order (RFC 9562
 * method 1), then random bits. Time-ordered, so a send's ids sort by creation, and random enough
 * never to collide across senders.
 */
import { v7 } from 'uuid';

export function uuidv7(nowMs?: number): string {
  return nowMs === undefined ? v7() : v7({ msecs: nowMs });
}
