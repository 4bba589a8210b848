/**
 * Secrets at rest: AES-256-GCM under a 32-byte master key.
 *
 * The master key comes from ECAPI_MASTER_KEY (64 hex chars or base64 of 32 bytes), else from the file
 * of --master-key-file / ECAPI_MASTER_KEY_FILE (a mounted secret; never created), else from
 * `<data-dir>/master.key`, created once, durably and with mode 0600 (fs/durable-files.ts).
 *
 * Why the checks (issue 21): a master key that is lost, emptied by a power failure, or silently
 * replaced makes every sealed signing secret unreadable, and every sender then gets 401 with no hint
 * why. So the control plane stores a fingerprint of the key its secrets are sealed with (an HMAC of a
 * fixed label under the key: it proves possession without revealing anything about the key) and
 * refuses any other key with one line saying which file or variable was read and what to do. A new
 * key is generated only when no control plane holds sealed secrets yet. Each sealed value binds its purpose
 * (for example the key id it belongs to) as additional authenticated data, so a ciphertext copied
 * onto another key's row fails to open instead of silently granting that key a known secret.
 *
 * Layout of a sealed value: 1 byte format version | 12 bytes IV | 16 bytes tag | ciphertext.
 */
import { createCipheriv, createDecipheriv, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { chmodSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ensureDirDurably, syncDirectory, writeFileDurably } from '../fs/durable-files.js';

const FORMAT_V1 = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;

export class SecretBoxError extends Error {
  override readonly name = 'SecretBoxError';
}

/** The master key cannot be used: missing, malformed, or not the one the control plane was sealed with. */
export class MasterKeyError extends SecretBoxError {}

/** The fixed label whose HMAC under the master key is the key's fingerprint. */
const FINGERPRINT_LABEL = 'ecapi-ingest master key fingerprint v1';

export class SecretBox {
  readonly #key: Buffer;

  constructor(masterKey: Buffer) {
    if (masterKey.length !== 32) throw new SecretBoxError('master key must be 32 bytes');
    this.#key = Buffer.from(masterKey);
  }

  /** HMAC-SHA256 of a fixed label under the key, hex: identifies the key without revealing it. */
  fingerprint(): string {
    return createHmac('sha256', this.#key).update(FINGERPRINT_LABEL).digest('hex');
  }

  /** Whether `fingerprint` (as stored by a control plane) is this key's, in constant time. */
  matches(fingerprint: string): boolean {
    const mine = Buffer.from(this.fingerprint(), 'hex');
    const theirs = Buffer.from(fingerprint, 'hex');
    return mine.length === theirs.length && timingSafeEqual(mine, theirs);
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

const KEY_FORMAT = '32 bytes, as 64 hex characters or base64';
const WHAT_TO_DO = 'restore master.key from your backup, or set ECAPI_MASTER_KEY (or --master-key-file) to the original key';

export function parseMasterKey(text: string): Buffer {
  const trimmed = text.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(trimmed) ? Buffer.from(trimmed, 'hex') : Buffer.from(trimmed, 'base64');
  if (key.length !== 32) throw new SecretBoxError(`master key must be ${KEY_FORMAT}`);
  return key;
}

/** A master key and where it was read from ("ECAPI_MASTER_KEY", or "master key file <path>"). */
export interface LoadedMasterKey {
  readonly key: Buffer;
  readonly origin: string;
}

/**
 * Loads the master key when a control plane first needs it. `holdsSecrets`: the control plane (or
 * another environment's) already holds secrets sealed under some key, so a missing key file is an
 * error and is never replaced by a new key.
 */
export interface MasterKeyLoader {
  load(holdsSecrets: boolean): LoadedMasterKey;
}

export interface MasterKeyOptions {
  readonly dataDir: string;
  /** --master-key-file; ECAPI_MASTER_KEY_FILE when absent. */
  readonly keyFile?: string | undefined;
  readonly env?: NodeJS.ProcessEnv;
}

function readKeyFile(file: string, origin: string): LoadedMasterKey {
  const text = readFileSync(file, 'utf8');
  if (text.trim() === '') {
    throw new MasterKeyError(`${origin} is empty, so it does not match the control plane: ${WHAT_TO_DO}`);
  }
  try {
    return { key: parseMasterKey(text), origin };
  } catch {
    throw new MasterKeyError(`${origin} does not hold a master key (${KEY_FORMAT}), so it does not match the control plane: ${WHAT_TO_DO}`);
  }
}

/** ECAPI_MASTER_KEY first, then --master-key-file / ECAPI_MASTER_KEY_FILE, then `<data-dir>/master.key`. */
export function masterKeyLoader(options: MasterKeyOptions): MasterKeyLoader {
  const env = options.env ?? process.env;
  return {
    load(holdsSecrets: boolean): LoadedMasterKey {
      const fromEnv = env.ECAPI_MASTER_KEY;
      if (fromEnv !== undefined && fromEnv !== '') {
        try {
          return { key: parseMasterKey(fromEnv), origin: 'ECAPI_MASTER_KEY' };
        } catch {
          throw new MasterKeyError(`ECAPI_MASTER_KEY does not hold a master key (${KEY_FORMAT}): set it to the original key, or unset it to use master.key`);
        }
      }
      const explicit = options.keyFile || env.ECAPI_MASTER_KEY_FILE || undefined;
      if (explicit !== undefined) {
        const file = resolve(explicit);
        const origin = `master key file ${file} (--master-key-file or ECAPI_MASTER_KEY_FILE)`;
        try {
          return readKeyFile(file, origin);
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
            throw new MasterKeyError(`${origin} does not exist: mount or restore it, or set ECAPI_MASTER_KEY`);
          }
          throw error;
        }
      }
      return loadMasterKeyFile(resolve(options.dataDir), holdsSecrets);
    },
  };
}

/** `<data-dir>/master.key`: read it, or create it when nothing is sealed yet. */
function loadMasterKeyFile(dataDir: string, holdsSecrets: boolean): LoadedMasterKey {
  const file = join(dataDir, 'master.key');
  const origin = `master key file ${file}`;
  try {
    const loaded = readKeyFile(file, origin);
    // An existing key file must not be readable by others; tighten rather than refuse.
    if ((statSync(file).mode & 0o077) !== 0) chmodSync(file, 0o600);
    // It may have been renamed into place by a run killed before the directory sync.
    ensureDirDurably(dataDir);
    syncDirectory(dataDir);
    return loaded;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  if (holdsSecrets) {
    throw new MasterKeyError(
      `${origin} does not exist, but the control plane holds secrets sealed with a master key, so a new key would not match it: ${WHAT_TO_DO}`,
    );
  }
  ensureDirDurably(dataDir);
  try {
    // Temporary file, fsync, link into place (never over an existing key), directory fsync.
    writeFileDurably(file, randomBytes(32).toString('base64') + '\n', { mode: 0o600, exclusive: true });
  } catch (error) {
    // Another process created it at the same moment: use that one.
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  return readKeyFile(file, origin);
}

/** The message of a key that does not match the control plane's fingerprint. */
export function masterKeyMismatch(origin: string, controlPlane: string): MasterKeyError {
  // Not "its secrets were sealed with": a second node started on a new database at the same time
  // meets this before any secret exists, and what it needs is the first node's key.
  return new MasterKeyError(`${origin} does not match the control plane (${controlPlane}), which was set up with another master key (every node and command of one control plane needs that one key); ${WHAT_TO_DO}`);
}

/** Loads the master key of a data dir (tests and tools): creates it when missing. */
export function loadMasterKey(dataDir: string, env: NodeJS.ProcessEnv = process.env): Buffer {
  return masterKeyLoader({ dataDir, env }).load(false).key;
}

/** What a control plane hands over to check a key: a SecretBox (tests) or a loader (the service). */
export type MasterKeySource = SecretBox | MasterKeyLoader;

/** What a control plane knows about the key its secrets are sealed with. */
export interface SealedState {
  /** The stored fingerprint, or null (a new control plane, or one from before fingerprints). */
  readonly fingerprint: string | null;
  /** One sealed secret and its associated data, to check a key against when no fingerprint is stored. */
  readonly sample: { readonly sealed: Uint8Array; readonly aad: string } | null;
  /** Another control plane sharing this key (the data dir's other environment) holds secrets. */
  readonly sealedElsewhere?: boolean;
}

/**
 * Loads the key (never creating one when secrets are sealed already) and checks it against the
 * control plane: its stored fingerprint, or else a sealed secret that must open. `controlPlane`
 * names it in the message (a file, or a PostgreSQL schema). The caller stores the fingerprint when
 * none was stored.
 */
export function unlockSecretBox(source: MasterKeySource, state: SealedState, controlPlane: string): SecretBox {
  const holdsSecrets = state.fingerprint !== null || state.sample !== null || state.sealedElsewhere === true;
  let box: SecretBox;
  let origin: string;
  if (source instanceof SecretBox) {
    box = source;
    origin = 'the master key in use';
  } else {
    const loaded = source.load(holdsSecrets);
    box = new SecretBox(loaded.key);
    origin = loaded.origin;
  }
  if (state.fingerprint !== null) {
    if (!box.matches(state.fingerprint)) throw masterKeyMismatch(origin, controlPlane);
  } else if (state.sample !== null) {
    try {
      box.open(state.sample.sealed, state.sample.aad);
    } catch {
      throw masterKeyMismatch(origin, controlPlane);
    }
  }
  return box;
}
