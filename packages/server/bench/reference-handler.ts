/**
 * The reference servers' request handler (reference-server.ts), shared with the ablation ladder
 * (ladder-server.ts), whose second rung runs it on the service's own TLS server:
 * - `bare`: read the body, answer a fixed 200;
 * - `hmac`: the same, plus HMAC-SHA256 verification of the body (constant-time) and JSON.parse of it.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

export function referenceHandler(mode: 'bare' | 'hmac', secret: string): (req: IncomingMessage, res: ServerResponse) => void {
  const key = Buffer.from(secret, 'utf8');
  return (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let body = '{"accepted":1}';
      if (mode === 'hmac') {
        const raw = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
        const given = Buffer.from(String(req.headers['x-service-signature']), 'hex');
        const expected = createHmac('sha256', key).update(raw).digest();
        if (given.length !== 32 || !timingSafeEqual(given, expected)) {
          res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"signature"}');
          return;
        }
        const parsed = JSON.parse(raw.toString('utf8')) as { events?: unknown[] };
        body = `{"accepted":${Array.isArray(parsed.events) ? parsed.events.length : 1}}`;
      }
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
    });
  };
}
