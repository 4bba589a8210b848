/**
 * Shared addresses, black-box (issue 29, point 6): a valid signed sender keeps being served while
 * another client on the same address (here: every client is 127.0.0.1) floods failed
 * authentications. Before, the address's bucket shed them all: a valid sender got 429 on 36 of 46
 * requests. Now a (key id, address) that passed the HMAC is judged by its own bucket, and a
 * connection that passed it is never shed (failed-auth-shedder.ts); everything else still is.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { once } from 'node:events';
import { signBody } from '@ecapi-ingest/protocol';
import { cliJson, provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { postSigned, sampleEvent, type Credentials } from '../helpers/https-client.js';

describe('failed authentications from a shared address', () => {
  let server: ServerProcess;
  let sender: Credentials;
  let unused: Credentials;
  before(async () => {
    const dataDir = tempDataDir();
    sender = await provision(dataDir, ['shared']);
    const key = await cliJson<{ key_id: string; secret: string }>(dataDir, ['key', 'create', '--data-set', 'shared']);
    unused = { keyId: key.key_id, secret: key.secret };
    // 5 failures shed an address; it refills one per 100 s (never within the test).
    server = await startServer({ dataDir, args: ['--workers', '1', '--failed-auth-burst', '5', '--failed-auth-rps', '0.01'] });
  });
  after(() => server.stop());

  const post = (creds: Credentials) => postSigned(server.port, server.ca, creds, 'shared', JSON.stringify(sampleEvent('shared')));

  test('a valid signed sender on new connections keeps getting 200 while another client on its address fails', async () => {
    assert.equal((await post(sender)).status, 200, 'the sender has sent before');
    const attacker: number[] = [];
    const served: number[] = [];
    for (let i = 0; i < 30; i++) {
      // The attacker alternates an unknown key id (refused from the head) and a real key id with a wrong signature.
      attacker.push((await post(i % 2 ? { keyId: 'no-such-key', secret: 'x' } : { keyId: unused.keyId, secret: 'wrong' })).status);
      served.push((await post(sender)).status);
    }
    assert.deepEqual(attacker.slice(0, 5), [401, 401, 401, 401, 401]);
    assert.deepEqual(attacker.slice(5), Array(25).fill(429), 'the address is shed for the attacker');
    assert.deepEqual(served, Array(30).fill(200), 'and never for the verified sender');
    // The exemption is the sender's proof, not the address's: a key never verified from here is shed with it.
    assert.equal((await post(unused)).status, 429);
  });

  test('an attacker naming the sender\'s key id sheds that pair on new connections, never the sender\'s open connection', async () => {
    const session = http2.connect(`https://localhost:${server.port}`, { ca: server.ca, minVersion: 'TLSv1.3' });
    await once(session, 'connect');
    const onSession = async (): Promise<number> => {
      const body = JSON.stringify(sampleEvent('shared'));
      const stream = session.request({
        ':method': 'POST', ':path': '/v1/events', 'content-type': 'application/json', accept: 'application/json',
        'x-service-key-id': sender.keyId, 'x-service-data-set': 'shared', 'x-service-signature': signBody(body, sender.secret),
      });
      stream.end(body);
      const [headers] = (await once(stream, 'response')) as [http2.IncomingHttpHeaders];
      stream.resume();
      await once(stream, 'end');
      return Number(headers[':status']);
    };
    try {
      assert.equal(await onSession(), 200);
      const forged: number[] = [];
      for (let i = 0; i < 10; i++) forged.push((await post({ keyId: sender.keyId, secret: 'wrong' })).status);
      assert.deepEqual(forged, [401, 401, 401, 401, 401, 429, 429, 429, 429, 429], 'the pair has its own burst');
      assert.equal((await post(sender)).status, 429, 'a new connection naming the pair waits (key ids are not secrets)');
      for (let i = 0; i < 5; i++) assert.equal(await onSession(), 200, 'the connection that proved the secret is served');
    } finally {
      session.close();
    }
  });
});
