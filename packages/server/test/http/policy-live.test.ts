/**
 * Black-box: the privacy policy set with `data-set policy` reaches a running server within 5 s,
 * and the queued record carries the event as accepted after policy, its metadata and the policy
 * version that was applied.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { cliJson, exportQueue, provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { postSigned, sampleEvent } from '../helpers/https-client.js';

let server: ServerProcess;
let dataDir: string;
let creds: { keyId: string; secret: string };

before(async () => {
  dataDir = tempDataDir();
  creds = await provision(dataDir, ['private']);
  server = await startServer({ dataDir, args: ['--workers', '1'] });
});
after(() => server.stop());

const event = (id: string) =>
  sampleEvent('private', {
    id,
    user_data: { event_ip_address: '203.0.113.77', landing_ip_address: '2001:db8:abcd:12:1:2:3:4' },
    properties: { page_url: 'https://shop.example/thanks?email=jane.doe@example.com&x=1' },
  });

async function sendAndFetch(id: string) {
  const res = await postSigned(server.port, server.ca, creds, 'private', JSON.stringify(event(id)));
  return { res, record: (await exportQueue(dataDir)).find((r) => r.event.id === id) };
}

test('defaults: IPs kept, plaintext email in page_url redacted, policy version 1 recorded', async () => {
  const { res, record } = await sendAndFetch('p-default');
  assert.equal(res.status, 200);
  assert.ok(record);
  assert.equal(record.event.user_data.event_ip_address, '203.0.113.77');
  assert.ok(!JSON.stringify(record.event).includes('jane.doe@example.com'), 'the plaintext email is not queued');
  assert.match(record.event.properties.page_url, /^https:\/\/shop\.example\/thanks\?email=.*redacted.*&x=1$/);
  assert.deepEqual(record.meta.piiRedacted, ['properties.page_url']);
  assert.equal((record as any).policy_version, 1);
});

test('a policy change reaches the running server within 5 s and is applied to queued events', async () => {
  const changed = await cliJson(dataDir, ['data-set', 'policy', 'private', '--ip', 'truncate', '--pii-scan', 'reject']);
  assert.equal(changed.policy.version, 2);
  assert.equal(changed.policy.ip, 'truncate');
  const listed = await cliJson<any[]>(dataDir, ['data-set', 'list']);
  assert.equal(listed.find((d) => d.id === 'private').policy.pii_scan, 'reject');

  const started = Date.now();
  let rejection: any;
  for (;;) {
    const res = await postSigned(server.port, server.ca, creds, 'private', JSON.stringify(event(`p-reject-${Date.now()}`)));
    if (res.status === 400) {
      rejection = res.json();
      break;
    }
    assert.ok(Date.now() - started < 5000, 'policy did not reach the server within 5 s');
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(rejection.errors[0].error.startsWith('invalid field properties.page_url: '), true, rejection.errors[0].error);

  await cliJson(dataDir, ['data-set', 'policy', 'private', '--pii-scan', 'off']);
  await new Promise((r) => setTimeout(r, 600));
  const { res, record } = await sendAndFetch('p-truncate');
  assert.equal(res.status, 200);
  assert.equal(record!.event.user_data.event_ip_address, '203.0.113.0');
  assert.equal(record!.event.user_data.landing_ip_address, '2001:db8:abcd::');
  assert.equal((record as any).policy_version, 3);
  assert.equal(record!.meta.ip, 'truncated');

  await cliJson(dataDir, ['data-set', 'policy', 'private', '--ip', 'drop']);
  await new Promise((r) => setTimeout(r, 600));
  const dropped = await sendAndFetch('p-drop');
  assert.equal(dropped.record!.event.user_data.event_ip_address, undefined);
  assert.equal(dropped.record!.event.user_data.landing_ip_address, undefined);
});

test('max-age: an event older than the data set allows is rejected with a reason', async () => {
  await cliJson(dataDir, ['data-set', 'policy', 'private', '--max-age', '1h']);
  await new Promise((r) => setTimeout(r, 600));
  const old = sampleEvent('private', { timestamp: Math.floor(Date.now() / 1000) - 7200 });
  const res = await postSigned(server.port, server.ca, creds, 'private', JSON.stringify(old));
  assert.equal(res.status, 400);
  assert.match(res.json().errors[0].error, /^invalid field timestamp: /);
});
