/** Unit tests of the privacy helpers: IP truncation, email redaction, GPP decoding and cache. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GppModel } from '@iabgpp/cmpapi';
import { formatIpv6, parseIpv6, truncateIp } from '../../src/privacy/ip.js';
import { REDACTED_EMAIL, redactEmails } from '../../src/privacy/pii-scan.js';
import { createGppDecoder, evaluateConsent } from '../../src/privacy/gpp.js';
import { gpp } from '../validation/helpers.js';

const TRUNCATE: ReadonlyArray<readonly [string, string]> = [
  ['192.0.2.255', '192.0.2.0'],
  ['10.1.2.3', '10.1.2.0'],
  ['2001:db8:85a3:8d3:1319:8a2e:370:7348', '2001:db8:85a3::'],
  ['2001:DB8:0:1:2:3:4:5', '2001:db8::'],
  ['::1', '::'],
  ['fe80::1:2', 'fe80::'],
  ['::ffff:192.0.2.1', '::ffff:192.0.2.0'],
  ['64:ff9b::192.0.2.33', '64:ff9b::'],
  ['2001:db8:abcd:12:0:0:0:1', '2001:db8:abcd::'],
  // RFC 5952 on truncated forms: a shorter leading zero run stays written out; a zone id is dropped.
  ['0:1:0:2::', '0:1::'],
  ['0:0:1:2:3:4:5:6', '0:0:1::'],
  ['1:0:2:3:4:5:6:7', '1:0:2::'],
  ['fe80::1%eth0', 'fe80::'],
  ['::ffff:c000:0221', '::ffff:192.0.2.0'],
];
for (const [input, output] of TRUNCATE) test(`truncateIp(${input}) = ${output}`, () => assert.equal(truncateIp(input), output));

test('parseIpv6 / formatIpv6 follow RFC 5952', () => {
  assert.deepEqual(parseIpv6('1:2:3:4:5:6:7:8'), [1, 2, 3, 4, 5, 6, 7, 8]);
  assert.deepEqual(parseIpv6('::'), [0, 0, 0, 0, 0, 0, 0, 0]);
  assert.equal(parseIpv6('1::2::3'), undefined);
  assert.equal(formatIpv6([0x2001, 0xdb8, 0, 0, 1, 0, 0, 1]), '2001:db8::1:0:0:1');
  assert.equal(formatIpv6([1, 0, 2, 3, 4, 5, 6, 7]), '1:0:2:3:4:5:6:7');
});

const REDACT: ReadonlyArray<readonly [string, string]> = [
  ['jane@example.com', REDACTED_EMAIL],
  ['mailto:jane@example.com.', `mailto:${REDACTED_EMAIL}.`],
  ['?e=jane%40example.com&b=1', `?e=${REDACTED_EMAIL}&b=1`],
  ['?e=jane%2Bpromo%40example.com', `?e=${REDACTED_EMAIL}`],
  ['no at sign here', 'no at sign here'],
  ['user@localhost', 'user@localhost'],
  ['@handle', '@handle'],
  ['icon@3x.webp', 'icon@3x.webp'],
  ['a@b.c', 'a@b.c'],
  ['x@1.2.3.4', 'x@1.2.3.4'],
];
for (const [input, output] of REDACT) test(`redactEmails(${JSON.stringify(input)})`, () => assert.equal(redactEmails(input), output));

test('redactEmails is linear on adversarial input', () => {
  const evil = `${'a'.repeat(200_000)}@${'b'.repeat(200_000)}!${'%40a'.repeat(50_000)}`;
  const start = process.hrtime.bigint();
  redactEmails(evil);
  assert.ok(Number(process.hrtime.bigint() - start) / 1e6 < 1000, 'took over a second');
});

test('GPP decoder caches by string and reports header ids', () => {
  const s = gpp({ usnat: { SaleOptOut: 1 }, uspv1: { Notice: 'Y', OptOutSale: 'N', LspaCovered: 'N' } });
  const decoder = createGppDecoder(2);
  const first = decoder.decode(s);
  assert.equal(decoder.decode(s), first);
  assert.ok(first.ok);
  if (!first.ok) return;
  assert.deepEqual(first.headerIds, [6, 7]);
  assert.deepEqual(evaluateConsent(first, undefined), { sections: [7], signals: ['usnat.SaleOptOut'], categories: ['sale'] });
  assert.equal(evaluateConsent(first, [6]), undefined);
  // the string round-trips through the library
  assert.equal(new GppModel(s).getFieldValue('usnat', 'SaleOptOut'), 1);
});

test('GPP decoder rejects malformed strings without echoing them', () => {
  const decoder = createGppDecoder();
  for (const bad of ['x', 'DB', 'DBABLA~B', 'DBABMA~!!!!']) {
    const r = decoder.decode(bad);
    assert.equal(r.ok, false, bad);
    if (!r.ok) assert.ok(!r.reason.includes(bad), r.reason);
  }
});
