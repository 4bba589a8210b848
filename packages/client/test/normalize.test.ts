import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  NormalizationError, hashCustomerId, hashEmail, hashGender, hashName, hashPhone, hashPostalCode, hashStreet, isSha256Hex,
  normalizeCity, normalizeCountryCode, normalizeCustomerId, normalizeEmail, normalizeGender, normalizeName, normalizePhone,
  normalizePostalCode, normalizeState, normalizeStreet, sha256Hex,
} from '../src/index.js';

test('the issue\'s test vectors', () => {
  assert.equal(hashEmail(' User@example.com '), 'b4c9a289323b21a01c3e940f150eb9b8c542587f1abfd8f0e1cc1ffc5e475514');
  assert.equal(hashPhone('+1 212-555-0000'), '7c8d08bf90ca322bcac37f99ba14e980e4b1f5ba919f7e16a030af9070ba125e');
  assert.equal(hashName(' Jane '), '81f8f6dde88365f3928796ec7aa53f72820b06db8664f5fe76a7eb13e24546a2');
  assert.equal(hashGender(' Female '), '9f165139a8c2894a47aea23b77d330eca847264224a44d5a17b19db8b9a72c08');
  assert.equal(hashCustomerId('User123'), 'e606e38b0d8c19b24cf0ee3808183162ea7cd63ff7912dbb22b5e803286b4446');
});

test('email: trimmed and lowercased; not an address is refused', () => {
  assert.equal(normalizeEmail('\t John.Doe+Tag@Example.COM \n'), 'john.doe+tag@example.com');
  assert.throws(() => normalizeEmail('   '), NormalizationError);
  assert.throws(() => normalizeEmail('no-at-sign'), /not an address/);
});

test('phone: E.164 with + and country code, default region for national numbers', () => {
  assert.equal(normalizePhone('+1 (212) 555-0000'), '+12125550000');
  assert.equal(normalizePhone('001 212 555 0000'), '+12125550000', '00 international prefix');
  assert.equal(normalizePhone('(212) 555-0000', { defaultRegion: 'US' }), '+12125550000');
  assert.equal(normalizePhone('212.555.0000', { defaultRegion: 'us' }), '+12125550000', 'region is case-insensitive');
  assert.equal(normalizePhone('020 7946 0018', { defaultRegion: 'GB' }), '+442079460018', 'leading zero (trunk prefix) removed');
  assert.equal(normalizePhone('+44 (0)20 7946 0018'), '+442079460018');
  assert.equal(normalizePhone('+49 30 901820'), '+4930901820');
  assert.equal(hashPhone('(212) 555-0000', { defaultRegion: 'US' }), hashPhone('+1 212-555-0000'));
  assert.throws(() => normalizePhone('212 555 0000'), /no country code/);
  assert.throws(() => normalizePhone('+1 55'), NormalizationError);
  assert.throws(() => normalizePhone(''), NormalizationError);
  assert.throws(() => normalizePhone('call me'), NormalizationError);
});

test('names and street: lowercase, punctuation removed, whitespace collapsed', () => {
  assert.equal(normalizeName("  O'Brien "), 'obrien');
  assert.equal(normalizeName('Mary-Jane'), 'maryjane');
  assert.equal(normalizeName('Ana  María'), 'ana maría', 'UTF-8 letters are kept (NFC)');
  assert.equal(normalizeName('Ana Mari\u0301a'), 'ana maría', 'decomposed input composes to the same string');
  assert.equal(normalizeStreet(' 12 Main St., Apt #4 '), '12 main st apt 4');
  assert.equal(hashStreet('12 Main St.'), sha256Hex('12 main st'));
  assert.throws(() => normalizeName(' .. '), /empty/);
});

test('city, state, country code: plain lowercase text', () => {
  assert.equal(normalizeCity(' New York '), 'new york');
  assert.equal(normalizeCity('St. Louis'), 'st louis');
  assert.equal(normalizeState(' CA '), 'ca');
  assert.equal(normalizeCountryCode(' US '), 'us');
  assert.throws(() => normalizeCountryCode('USA'), /two letters/);
});

test('postal code: US ZIP+4 to 5 digits, others lowercased and trimmed', () => {
  assert.equal(normalizePostalCode(' 10001 '), '10001');
  assert.equal(normalizePostalCode('10001-1234'), '10001');
  assert.equal(normalizePostalCode('SW1A 1AA'), 'sw1a 1aa');
  assert.equal(hashPostalCode('10001-1234'), sha256Hex('10001'));
});

test('gender and customer id: trimmed and lowercased', () => {
  assert.equal(normalizeGender(' F '), 'f');
  assert.equal(normalizeCustomerId(' CUST-0042 '), 'cust-0042');
  assert.throws(() => normalizeCustomerId('  '), NormalizationError);
});

test('isSha256Hex and sha256Hex', () => {
  assert.equal(isSha256Hex(sha256Hex('x')), true);
  assert.equal(isSha256Hex(sha256Hex('x').toUpperCase()), false);
  assert.equal(isSha256Hex('abc'), false);
});
