/**
 * Signed requests on a connection that starts with a PROXY header (or nothing) and then does a real
 * TLS 1.3 handshake, as behind a balancer with send-proxy: the client address the service counts is
 * the one the header names (http/connection-front.ts). Shared by the PROXY protocol and the IPv6
 * shedding tests.
 */
import net from 'node:net';
import tls from 'node:tls';
import https from 'node:https';
import http2 from 'node:http2';
import { once } from 'node:events';
import { signBody } from '@ecapi-ingest/protocol';
import type { ServerProcess } from './server-process.js';
import { sampleEvent, type Credentials } from './https-client.js';

/** A TCP connection that writes `preface` (a PROXY header, or nothing) and then does a real TLS 1.3 handshake. */
export async function tlsAfter(port: number, ca: string, preface: Buffer | null, alpn: string): Promise<tls.TLSSocket> {
  const raw = net.connect(port, '127.0.0.1');
  await once(raw, 'connect');
  if (preface) raw.write(preface);
  const socket = tls.connect({ socket: raw, servername: 'localhost', ca, minVersion: 'TLSv1.3', ALPNProtocols: [alpn] });
  await once(socket, 'secureConnect');
  return socket;
}

export function signedHeaders(creds: Credentials, dataSet: string, body: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    accept: 'application/json',
    'x-service-key-id': creds.keyId,
    'x-service-data-set': dataSet,
    'x-service-signature': signBody(body, creds.secret),
  };
}

/** One signed POST over HTTP/1.1 on a connection that starts with `preface`; resolves the status. */
export async function postVia(server: ServerProcess, preface: Buffer | null, creds: Credentials, dataSet: string): Promise<number> {
  const socket = await tlsAfter(server.port, server.ca, preface, 'http/1.1');
  const body = JSON.stringify(sampleEvent(dataSet));
  return new Promise((resolve, reject) => {
    const req = https.request(
      { createConnection: () => socket, method: 'POST', path: '/v1/events', host: 'localhost', headers: { ...signedHeaders(creds, dataSet, body), 'content-length': Buffer.byteLength(body) } },
      (res) => {
        res.resume();
        res.on('end', () => {
          socket.destroy();
          resolve(res.statusCode ?? 0);
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** The same over HTTP/2 (the address is read through the session's socket proxy). */
export async function postViaH2(server: ServerProcess, preface: Buffer | null, creds: Credentials, dataSet: string): Promise<number> {
  const socket = await tlsAfter(server.port, server.ca, preface, 'h2');
  const session = http2.connect(`https://localhost:${server.port}`, { createConnection: () => socket });
  const body = JSON.stringify(sampleEvent(dataSet));
  try {
    const stream = session.request({ ':method': 'POST', ':path': '/v1/events', ...signedHeaders(creds, dataSet, body) });
    stream.end(body);
    const [headers] = (await once(stream, 'response')) as [http2.IncomingHttpHeaders];
    stream.resume();
    await once(stream, 'end');
    return Number(headers[':status']);
  } finally {
    session.close();
  }
}

