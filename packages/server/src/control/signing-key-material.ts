/**
 * How signing keys are named and how their secrets are sealed, shared by every control-plane store.
 * The additional authenticated data binds a sealed secret to its key id and slot; it must be the
 * same in every store, or a secret sealed by one could not be opened by another.
 */
import { randomBytes } from 'node:crypto';

export const secretAad = (keyId: string): string => `ecapi-ingest/signing-key/${keyId}/current`;
export const previousAad = (keyId: string): string => `ecapi-ingest/signing-key/${keyId}/previous`;

/** A key id: not secret, printable, 80 random bits. */
export const newKeyId = (): string => `key_${randomBytes(10).toString('hex')}`;

/** A shared secret: 256 random bits, base64url; the HMAC key is its UTF-8 bytes as printed. */
export const newSecret = (): string => `sk_${randomBytes(32).toString('base64url')}`;
