/**
 * The machine's reference points, served over the same TLS 1.3 as the service:
 * - `bare`: node:https reads the body and answers a fixed 200;
 * - `hmac`: the same, plus HMAC-SHA256 verification of the body and JSON.parse of it.
 * Usage: node reference-server.js <bare|hmac> <port> <certFile> <keyFile> <secret>
 * Prints "listening <port>" when ready.
 */
import { createServer } from 'node:https';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';

const [mode, portText, certFile, keyFile, secret] = process.argv.slice(2);
const key = Buffer.from(secret ?? '', 'utf8');

const server = createServer(
  { cert: readFileSync(certFile!), key: readFileSync(keyFile!), minVersion: 'TLSv1.3', maxVersion: 'TLSv1.3' },
  (req, res) => {
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
  },
);
server.keepAliveTimeout = 65_000;
server.listen(Number(portText), '127.0.0.1', () => {
  process.stdout.write(`listening ${(server.address() as { port: number }).port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
