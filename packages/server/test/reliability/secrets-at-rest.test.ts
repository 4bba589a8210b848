/**
 * Secrets and identifiers: with ECAPI_LOG_LEVEL=trace, after valid and hostile traffic, a key
 * rotation (old and new secret in use), a revocation and a restart, the whole output of the
 * server (primary, serving workers, consumer) contains no secret, signature, bearer token, event
 * id or hashed identifier; and no file under the data dir holds an issued secret in plain text.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { signBody } from '@ecapi-ingest/protocol';
import { cliJson, exportQueue, provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { postSigned, request, sampleEvent } from '../helpers/https-client.js';
import { waitFor } from '../helpers/fault-tools.js';

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

const hex64 = () => Array.from({ length: 64 }, () => '0123456789abcdef'[Math.floor(Math.random() * 16)]).join('');

test('no secret, signature or identifier in trace-level logs or in plain text in the data dir', { timeout: 180_000 }, async () => {
  const dataDir = tempDataDir('ecapi-secrets-');
  const a = await provision(dataDir, ['sec-a']);
  const b = await provision(dataDir, ['sec-b']);
  const secrets = [a.secret, b.secret];
  const forbidden = new Set<string>(secrets);
  const outputs: string[] = [];
  const start = () => startServer({ dataDir, extraEnv: { ECAPI_LOG_LEVEL: 'trace' } });
  let server: ServerProcess = await start();

  const traffic = async (creds: { keyId: string; secret: string }, ds: string, round: string, expect = 200) => {
    for (let i = 0; i < 10; i++) {
      const email = hex64();
      const phone = hex64();
      const event = sampleEvent(ds, { id: `${round}-id-${i}-${Math.random().toString(36).slice(2)}`, user_data: { email_address: [email], phone_numbers: [phone], customer_identifier: hex64() } });
      const body = JSON.stringify(i % 2 ? { events: [event] } : event);
      forbidden.add(event.id as string).add(email).add(phone).add((event.user_data as { customer_identifier: string }).customer_identifier);
      forbidden.add(signBody(body, creds.secret));
      const res = await postSigned(server.port, server.ca, creds, ds, body, { http2: i % 3 === 0 });
      assert.equal(res.status, expect, res.text);
    }
    // Hostile: wrong signatures, a bearer token, an unknown key, a body with a PII-looking string.
    const body = JSON.stringify(sampleEvent(ds, { id: `${round}-bad`, properties: { note: `write to ${round}@example.com` } }));
    forbidden.add(`${round}-bad`).add(`${round}@example.com`);
    const wrongSig = signBody(body, 'not-the-secret');
    forbidden.add(wrongSig);
    assert.equal((await postSigned(server.port, server.ca, creds, ds, body, { headers: { 'x-service-signature': wrongSig } })).status, 401);
    const bearer = `tok${hex64()}`;
    forbidden.add(bearer);
    assert.equal((await postSigned(server.port, server.ca, creds, ds, body, { headers: { authorization: `Bearer ${bearer}` } })).status, 401);
    assert.equal((await request(server.port, server.ca, { path: '/nope', headers: { authorization: `Bearer ${bearer}` } })).status, 403);
    assert.equal((await postSigned(server.port, server.ca, { keyId: 'key_unknown', secret: 'x' }, ds, body)).status, 401);
    assert.equal((await postSigned(server.port, server.ca, creds, ds, body)).status, expect);
  };

  await traffic(a, 'sec-a', 'r1');
  await traffic(b, 'sec-b', 'r1');
  // Rotation: both the old and the new secret verify during the grace period.
  const rotated = await cliJson<{ secret: string }>(dataDir, ['key', 'rotate', a.keyId, '--grace', '1h']);
  secrets.push(rotated.secret);
  forbidden.add(rotated.secret);
  await new Promise((r) => setTimeout(r, 600)); // the control poll is 200 ms
  await traffic({ keyId: a.keyId, secret: rotated.secret }, 'sec-a', 'r2');
  await traffic(a, 'sec-a', 'r3');
  await cliJson(dataDir, ['key', 'revoke', b.keyId]);
  await new Promise((r) => setTimeout(r, 600));
  await traffic(b, 'sec-b', 'r4', 401); // revoked

  assert.equal(await server.stop(), 0);
  outputs.push(server.output());
  server = await start();
  await traffic({ keyId: a.keyId, secret: rotated.secret }, 'sec-a', 'r5');
  // Let the consumer (a child of serve, logging at trace too) catch up on everything.
  const lastIds = (await exportQueue(dataDir)).length;
  assert.ok(lastIds > 0);
  await waitFor('the consumer to catch up', async () => {
    const status = await cliJson<{ lag_records: number }>(dataDir, ['worker', 'status']);
    return status.lag_records === 0;
  }, 30_000, 200);
  assert.equal(await server.stop(), 0);
  outputs.push(server.output());

  const logs = outputs.join('\n');
  assert.ok(logs.includes('"request_id"'), 'the server logged its requests');
  for (const value of forbidden) {
    assert.ok(!logs.includes(value), `logs must not contain ${value.slice(0, 6)}… (secret, signature, token or identifier)`);
  }
  for (const file of filesUnder(dataDir)) {
    const bytes = readFileSync(file);
    for (const secret of secrets) {
      assert.equal(bytes.indexOf(Buffer.from(secret, 'utf8')), -1, `${file} holds a secret in plain text`);
      // Nor its hex or base64 encodings.
      assert.equal(bytes.indexOf(Buffer.from(Buffer.from(secret).toString('hex'))), -1, `${file} holds a secret as hex`);
      assert.equal(bytes.indexOf(Buffer.from(Buffer.from(secret).toString('base64'))), -1, `${file} holds a secret as base64`);
    }
  }
});
