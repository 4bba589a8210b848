/**
 * UUIDv7 (RFC 9562): 48-bit unix milliseconds, version 7, 74 random bits. Time-ordered, so event
 * ids generated for one send sort by creation, and random enough never to collide across senders.
 */
import { randomFillSync } from 'node:crypto';

const POOL_SIZE = 16 * 512;
const pool = Buffer.allocUnsafe(POOL_SIZE);
let offset = POOL_SIZE;
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

export function uuidv7(nowMs: number = Date.now()): string {
  if (offset === POOL_SIZE) {
    randomFillSync(pool);
    offset = 0;
  }
  const b = pool.subarray(offset, offset + 16);
  offset += 16;
  const ms = Math.max(0, Math.floor(nowMs));
  const high = Math.floor(ms / 2 ** 16);
  const low = ms % 2 ** 16;
  b[0] = (high >>> 24) & 0xff;
  b[1] = (high >>> 16) & 0xff;
  b[2] = (high >>> 8) & 0xff;
  b[3] = high & 0xff;
  b[4] = (low >>> 8) & 0xff;
  b[5] = low & 0xff;
  b[6] = 0x70 | (b[6]! & 0x0f);
  b[8] = 0x80 | (b[8]! & 0x3f);
  let s = '';
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) s += '-';
    s += HEX[b[i]!];
  }
  return s;
}
