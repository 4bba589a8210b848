/**
 * The machine's reference points, served over the same TLS 1.3 as the service:
 * - `bare`: node:https reads the body and answers a fixed 200;
 * - `hmac`: the same, plus HMAC-SHA256 verification of the body and JSON.parse of it.
 * Usage: node reference-server.js <bare|hmac> <port> <certFile> <keyFile> <secret>
 * Prints "listening <port>" when ready.
 */
import { createServer } from 'node:https';
import { readFileSync } from 'node:fs';
import { referenceHandler } from './reference-handler.js';

const [mode, portText, certFile, keyFile, secret] = process.argv.slice(2);

const server = createServer(
  { cert: readFileSync(certFile!), key: readFileSync(keyFile!), minVersion: 'TLSv1.3', maxVersion: 'TLSv1.3' },
  referenceHandler(mode === 'hmac' ? 'hmac' : 'bare', secret ?? ''),
);
server.keepAliveTimeout = 65_000;
server.listen(Number(portText), '127.0.0.1', () => {
  process.stdout.write(`listening ${(server.address() as { port: number }).port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
