/**
 * A scripted HTTPS server on loopback for the SDK's tests (the SDK speaks https:// only): a
 * self-signed certificate for 127.0.0.1 made once per test process with the openssl command line,
 * replies taken from a script, every request recorded.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, type ClientOptions } from '../../src/index.js';

let material: { cert: string; key: string } | undefined;

/** A self-signed certificate for 127.0.0.1 and localhost (openssl req -x509). */
export function selfSigned(): { cert: string; key: string } {
  if (material) return material;
  const dir = mkdtempSync(join(tmpdir(), 'ecapi-client-tls-'));
  try {
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
      '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost',
      '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
    ], { stdio: 'ignore' });
    material = { cert: readFileSync(join(dir, 'cert.pem'), 'utf8'), key: readFileSync(join(dir, 'key.pem'), 'utf8') };
    return material;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `body` is sent as JSON (`{}` when absent); `raw`, when given, is sent instead, as is (an HTML page, or '' for no body). */
export type Reply = { status: number; body?: unknown; raw?: string; headers?: Record<string, string>; delayMs?: number };

export interface Seen {
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
  /** The request's events (parsed body). */
  readonly events: { id: string }[];
}

/** An HTTPS server answering request n with replies[n] (the last one repeats), or with reply(seen) when a function. */
export async function scripted(replies: Reply[] | ((seen: Seen, n: number) => Reply | Promise<Reply>)) {
  const seen: Seen[] = [];
  const { cert, key } = selfSigned();
  const server = https.createServer({ cert, key, minVersion: 'TLSv1.3' }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks);
      let events: { id: string }[] = [];
      try {
        events = (JSON.parse(body.toString()) as { events: { id: string }[] }).events ?? [];
      } catch {
        // not JSON: recorded as is
      }
      const entry = { headers: req.headers, body, events };
      seen.push(entry);
      const reply = typeof replies === 'function' ? await replies(entry, seen.length - 1) : replies[Math.min(seen.length - 1, replies.length - 1)]!;
      setTimeout(() => {
        if (res.destroyed) return;
        res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers });
        res.end(reply.raw ?? JSON.stringify(reply.body ?? {}));
      }, reply.delayMs ?? 0);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    seen,
    port,
    baseUrl: `https://127.0.0.1:${port}`,
    client: (o: Partial<ClientOptions> = {}) =>
      new Client({ baseUrl: `https://127.0.0.1:${port}`, ca: cert, keyId: 'key_1', secret: 'sk_1', dataSetId: 'ds', backoff: { baseMs: 10, maxMs: 40 }, ...o }),
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}
