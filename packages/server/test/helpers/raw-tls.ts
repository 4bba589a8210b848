/**
 * Byte-level clients for hostile-input tests: a raw TLS 1.3 socket that sends exactly the bytes a
 * test writes (malformed framing, trickles), and records what came back and when the server closed.
 */
import tls from 'node:tls';
import type net from 'node:net';
import { signBody } from '@ecapi-ingest/protocol';

export interface RawExchange {
  readonly socket: tls.TLSSocket;
  /** Everything received so far, as latin1 text (HTTP/1.1 framing is ASCII). */
  received(): string;
  /** Resolves when the server closed the connection (or it errored), with ms since `open`. */
  readonly closed: Promise<{ afterMs: number; error?: string }>;
  isClosed(): boolean;
  write(data: string | Buffer): Promise<void>;
  destroy(): void;
}

/** Opens a TLS 1.3 connection with ALPN http/1.1; resolves once the handshake is done. */
export function openRaw(port: number, ca: string, options: tls.ConnectionOptions & Pick<net.TcpNetConnectOpts, 'localAddress'> = {}): Promise<RawExchange> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const chunks: Buffer[] = [];
    let closedFlag = false;
    let settleClosed: (value: { afterMs: number; error?: string }) => void = () => {};
    const closed = new Promise<{ afterMs: number; error?: string }>((r) => (settleClosed = r));
    let error: string | undefined;
    let connected = false;
    const socket = tls.connect({
      host: '127.0.0.1',
      servername: 'localhost',
      port,
      ca,
      minVersion: 'TLSv1.3',
      ALPNProtocols: ['http/1.1'],
      ...options,
    });
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', (e) => {
      error = e.message;
      if (!connected) reject(e);
    });
    socket.on('close', () => {
      closedFlag = true;
      settleClosed({ afterMs: performance.now() - started, ...(error ? { error } : {}) });
    });
    socket.once('secureConnect', () => {
      connected = true;
      resolve({
        socket,
        received: () => Buffer.concat(chunks).toString('latin1'),
        closed,
        isClosed: () => closedFlag,
        write: (data) =>
          new Promise<void>((done) => {
            if (socket.destroyed || !socket.writable) return done();
            socket.write(data, () => done());
          }),
        destroy: () => socket.destroy(),
      });
    });
  });
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Request head for POST /v1/events with signed ECAPI headers; `extra` lines are appended verbatim. */
export function signedHead(body: string | Buffer, creds: { keyId: string; secret: string }, dataSet: string, extra: string[] = []): string {
  return [
    'POST /v1/events HTTP/1.1',
    'Host: localhost',
    'Content-Type: application/json',
    'Accept: application/json',
    `X-Service-Key-Id: ${creds.keyId}`,
    `X-Service-Data-Set: ${dataSet}`,
    `X-Service-Signature: ${signBody(body, creds.secret)}`,
    ...extra,
    '',
    '',
  ].join('\r\n');
}

/** Parses the HTTP/1.1 responses in `text` (Content-Length framed, as the server sends them). */
export function parseResponses(text: string): { status: number; headers: Record<string, string>; body: string }[] {
  const out: { status: number; headers: Record<string, string>; body: string }[] = [];
  let rest = text;
  while (rest.startsWith('HTTP/1.1 ')) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) break;
    const [statusLine, ...lines] = rest.slice(0, end).split('\r\n');
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const i = line.indexOf(':');
      headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
    const length = Number(headers['content-length'] ?? 0);
    out.push({ status: Number(statusLine!.split(' ')[1]), headers, body: rest.slice(end + 4, end + 4 + length) });
    rest = rest.slice(end + 4 + length);
  }
  return out;
}
