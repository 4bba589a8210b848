/**
 * Requests refused before authentication are logged per reason, not one line each (audit: one line
 * per unauthenticated request let a client without credentials write the log at its request rate).
 * Black-box against the real `serve` process over real TLS 1.3: 40 requests with an unknown key id
 * give a full line (with its request id) per window of a second and a line counting the others; a signed request keeps
 * its own line. The aggregation rules themselves: observability/log-bounds.test.ts.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { signBody } from '@ecapi-ingest/protocol';
import { provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { sampleEvent, type Credentials } from '../helpers/https-client.js';
import { waitFor } from '../helpers/fault-tools.js';

const DS = 'logs';
let server: ServerProcess;
let creds: Credentials;

before(async () => {
  const dataDir = tempDataDir();
  creds = await provision(dataDir, [DS]);
  server = await startServer({ dataDir, args: ['--workers', '1', '--no-worker', '--failed-auth-burst', '100000'] });
});
after(async () => {
  assert.equal(await server.stop(), 0);
});

async function post(who: Credentials): Promise<{ status: number; requestId: string }> {
  const session = http2.connect(`https://localhost:${server.port}`, { ca: server.ca, minVersion: 'TLSv1.3' });
  session.on('error', () => {});
  try {
    const body = JSON.stringify(sampleEvent(DS));
    const stream = session.request({
      ':method': 'POST', ':path': '/v1/events', 'content-type': 'application/json', accept: 'application/json',
      'x-service-key-id': who.keyId, 'x-service-data-set': DS, 'x-service-signature': signBody(body, who.secret),
    });
    stream.end(body);
    const headers = await new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
      stream.once('response', resolve);
      stream.once('error', reject);
    });
    stream.resume();
    return { status: Number(headers[':status']), requestId: String(headers['x-request-id']) };
  } finally {
    session.close();
  }
}

const logLines = () => server.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);

test('40 refused requests sent together: a full line per window and a count of the others, not 40 lines; a signed request keeps its line', async () => {
  // Sent together (one connection each: a connection is closed after its 3rd refusal).
  const answers = await Promise.all(Array.from({ length: 40 }, () => post({ keyId: 'no-such-key', secret: 'x' })));
  assert.deepEqual(new Set(answers.map((a) => a.status)), new Set([401]));
  const ids = new Set(answers.map((a) => a.requestId));
  const ok = await post(creds);
  assert.equal(ok.status, 200);
  // Every refusal is accounted for: in full, or in a count line.
  const lines = await waitFor('the refusals to be accounted for in the log', () => {
    const all = logLines();
    const full = all.filter((l) => l.msg === 'request' && l.status === 401);
    const counted = all.filter((l) => l.msg === 'requests refused before authentication' && l.status === 401).reduce((n, l) => n + Number(l.count), 0);
    return full.length + counted === 40 && all.some((l) => l.request_id === ok.requestId) ? all : undefined;
  }, 10_000);
  const full = lines.filter((l) => l.msg === 'request' && l.status === 401);
  // Each window (1 s) logs its first refusal in full; 40 requests sent together span one or two.
  assert.ok(full.length <= 20, `${full.length} full lines for 40 refusals`);
  assert.ok(full.every((l) => ids.has(String(l.request_id))), 'a refusal logged in full carries its request id');
  assert.ok(!server.output().includes('no-such-key'), 'the unverified key id a client sent is not logged');
});
