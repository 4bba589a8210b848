/**
 * Secrets at rest: AES-256-GCM under a 32-byte master key.
 *
 * The master key comes from ECAPI_MASTER_KEY (64 hex chars or base64 of 32 bytes) or, failing that,
 * from `<data-dir>/master.key`, created once with mode 0600. Each sealed value binds its purpose
 * (for example the key id it belongs to) as additional authenticated data, so a ciphertext copied
 * onto another key's row fails to open instead of silently granting that key a known secret.
 *
 * Layout of a sealed value: 1 byte format version | 12 bytes IV | 16 bytes tag | ciphertext.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync, chmodSync, statSync } from 'node:fs';
import { join } from 'node:path';

const FORMAT_V1 = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;

export class SecretBoxError extends Error {
  override readonly name = 'SecretBoxError';
}

export class SecretBox {
  readonly #key: Buffer;

  constructor(masterKey: Buffer) {
    if (masterKey.length !== 32) throw new SecretBoxError('master key must be 32 bytes');
    this.#key = Buffer.from(masterKey);
  }

  seal(plaintext: string, associatedData: string): Buffer {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv);
    cipher.setAAD(Buffer.from(associatedData, 'utf8'));
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return Buffer.concat([Buffer.of(FORMAT_V1), iv, cipher.getAuthTag(), ciphertext]);
  }

  open(sealed: Uint8Array, associatedData: string): string {
    const box = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength);
    if (box.length < 1 + IV_BYTES + TAG_BYTES || box[0] !== FORMAT_V1) {
      throw new SecretBoxError('sealed secret has an unknown format');
    }
    const iv = box.subarray(1, 1 + IV_BYTES);
    const tag = box.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES);
    const decipher = createDecipheriv('aes-256-gcm', this.#key, iv);
    decipher.setAAD(Buffer.from(associatedData, 'utf8'));
    decipher.setAuthTag(tag);
    try {
      return Buffer.concat([decipher.update(box.subarray(1 + IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch (cause) {
      throw new SecretBoxError(
        'cannot decrypt a stored secret: the master key (ECAPI_MASTER_KEY or master.key) is not the one it was sealed with',
        { cause },
      );
    }
  }
}

export function parseMasterKey(text: string): Buffer {
  const trimmed = text.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(trimmed) ? Buffer.from(trimmed, 'hex') : Buffer.from(trimmed, 'base64');
  if (key.length !== 32) throw new SecretBoxError('master key must be 32 bytes, given as 64 hex characters or base64');
  return key;
}

/** Loads the master key from the environment or the data dir, creating the key file on first use. */
export function loadMasterKey(dataDir: string, env: NodeJS.ProcessEnv = process.env): Buffer {
  const fromEnv = env.ECAPI_MASTER_KEY;
  if (fromEnv !== undefined && fromEnv !== '') return parseMasterKey(fromEnv);
  mkdirSync(dataDir, { recursive: true });
  const file = join(dataDir, 'master.key');
  try {
    writeFileSync(file, randomBytes(32).toString('base64') + '\n', { flag: 'wx', mode: 0o600 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    // An existing key file must not be readable by others; tighten rather than refuse.
    if ((statSync(file).mode & 0o077) !== 0) chmodSync(file, 0o600);
  }
  return parseMasterKey(readFileSync(file, 'utf8'));
}
