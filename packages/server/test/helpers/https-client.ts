/**
 * A minimal real TLS client for black-box tests, over HTTP/1.1 (node:https) or HTTP/2
 * (node:http2), trusting the server's self-signed certificate.
 */
import https from 'node:https';
import http2 from 'node:http2';
import { signBody } from '@ecapi-ingest/protocol';

export interface HttpResult {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
  json(): any;
}

export interface SendOptions {
  readonly method?: string;
  readonly path?: string;
  readonly headers?: Record<string, string | string[]>;
  readonly body?: string | Buffer;
  readonly http2?: boolean;
  /** Send the body with Transfer-Encoding: chunked (HTTP/1.1), in pieces of this size. */
  readonly chunked?: number;
}

function result(status: number, headers: HttpResult['headers'], text: string): HttpResult {
  return { status, headers, text, json: () => JSON.parse(text) };
}

export function request(port: number, ca: string, options: SendOptions = {}): Promise<HttpResult> {
  const body = options.body === undefined ? undefined : Buffer.isBuffer(options.body) ? options.body : Buffer.from(options.body, 'utf8');
  if (options.http2) {
    return new Promise((resolve, reject) => {
      const session = http2.connect(`https://localhost:${port}`, { ca, minVersion: 'TLSv1.3' });
      session.on('error', reject);
      const stream = session.request({
        ':method': options.method ?? 'POST',
        ':path': options.path ?? '/v1/events',
        ...(options.headers ?? {}),
      });
      let status = 0;
      let headers: HttpResult['headers'] = {};
      const chunks: Buffer[] = [];
      stream.on('response', (h) => {
        status = Number(h[':status']);
        headers = h as HttpResult['headers'];
      });
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        session.close();
        resolve(result(status, headers, Buffer.concat(chunks).toString('utf8')));
      });
      stream.on('error', (error) => {
        session.close();
        if (status) resolve(result(status, headers, Buffer.concat(chunks).toString('utf8')));
        else reject(error);
      });
      stream.end(body);
    });
  }
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | string[] | number> = { ...(options.headers ?? {}) };
    if (body !== undefined && !options.chunked) headers['content-length'] = body.length;
    const req = https.request(
      {
        host: '127.0.0.1',
        servername: 'localhost',
        port,
        ca,
        minVersion: 'TLSv1.3',
        method: options.method ?? 'POST',
        path: options.path ?? '/v1/events',
        headers,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve(result(res.statusCode ?? 0, res.headers, Buffer.concat(chunks).toString('utf8'))));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    if (body !== undefined && options.chunked) {
      for (let i = 0; i < body.length; i += options.chunked) req.write(body.subarray(i, i + options.chunked));
      req.end();
    } else {
      req.end(body);
    }
  });
}

export interface Credentials {
  readonly keyId: string;
  readonly secret: string;
}

/** POSTs a body to /v1/events signed with the credentials, with the spec's headers. */
export function postSigned(
  port: number,
  ca: string,
  credentials: Credentials,
  dataSetId: string,
  body: string | Buffer,
  options: Omit<SendOptions, 'body'> = {},
): Promise<HttpResult> {
  return request(port, ca, {
    ...options,
    body,
    headers: {
      'content-type': 'application/json',
      accept: 'application/json',
      'x-service-key-id': credentials.keyId,
      'x-service-data-set': dataSetId,
      'x-service-signature': signBody(body, credentials.secret),
      ...(options.headers ?? {}),
    },
  });
}

/** A valid minimal event stamped now. */
export function sampleEvent(dataSetId: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    data_set_id: dataSetId,
    id: `evt-${Math.random().toString(36).slice(2)}`,
    timestamp: Math.floor(Date.now() / 1000) - 10,
    event_type: 'purchase',
    value: 19.99,
    currency_code: 'USD',
    source: 'website',
    ...overrides,
  };
}
