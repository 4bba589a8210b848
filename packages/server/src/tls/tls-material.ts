/**
 * TLS material for the public port. Operators pass real files with --tls-cert / --tls-key; on a
 * fresh data dir the service generates a self-signed P-256 certificate for localhost, 127.0.0.1
 * and ::1 (with the `selfsigned` library, no openssl subprocess) and reuses it on later starts
 * until it comes within a week of expiry.
 *
 * The generated files are written durably (fs/durable-files.ts: temporary file, fsync, rename,
 * directory fsync), key first: after a power failure the pair is either the old one, the new key
 * with the old certificate (detected below: regenerated), or the new pair; never an empty file.
 * Both are 0600 in a 0700 directory, like everything in the data dir.
 */
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { generate } from 'selfsigned';
import { ensureDirDurably, syncDirectory, writeFileDurably } from '../fs/durable-files.js';

export interface TlsMaterial {
  readonly cert: string;
  readonly key: string;
  /** Where the certificate lives, so that a client (curl --cacert) can trust it. */
  readonly certFile: string;
  readonly selfSigned: boolean;
}

const RENEW_BEFORE_MS = 7 * 24 * 3600 * 1000;

export function selfSignedCertFile(dataDir: string): string {
  return join(dataDir, 'tls', 'localhost-cert.pem');
}

export async function loadTlsMaterial(options: {
  dataDir: string;
  certFile?: string | undefined;
  keyFile?: string | undefined;
}): Promise<TlsMaterial> {
  if (options.certFile || options.keyFile) {
    if (!options.certFile || !options.keyFile) throw new Error('--tls-cert and --tls-key must be given together');
    return {
      cert: readFileSync(options.certFile, 'utf8'),
      key: readFileSync(options.keyFile, 'utf8'),
      certFile: options.certFile,
      selfSigned: false,
    };
  }
  const dir = join(options.dataDir, 'tls');
  const certFile = selfSignedCertFile(options.dataDir);
  const keyFile = join(dir, 'localhost-key.pem');
  if (existsSync(certFile) && existsSync(keyFile)) {
    const cert = readFileSync(certFile, 'utf8');
    const key = readFileSync(keyFile, 'utf8');
    if (validUntil(cert) - Date.now() > RENEW_BEFORE_MS && keyMatchesCert(cert, key)) {
      // Written by an earlier run that may have been killed before its directory syncs.
      ensureDirDurably(dir);
      syncDirectory(dir);
      return { cert, key, certFile, selfSigned: true };
    }
  }
  ensureDirDurably(dir);
  const notBeforeDate = new Date(Date.now() - 60_000);
  const pems = await generate([{ name: 'commonName', value: 'localhost' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate,
    notAfterDate: new Date(notBeforeDate.getTime() + 365 * 24 * 3600 * 1000),
    extensions: [
      { name: 'basicConstraints', cA: false, critical: true },
      { name: 'keyUsage', digitalSignature: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'localhost' },
          { type: 7, ip: '127.0.0.1' },
          { type: 7, ip: '::1' },
        ],
      },
    ],
  });
  writeFileDurably(keyFile, pems.private);
  writeFileDurably(certFile, pems.cert);
  return { cert: pems.cert, key: pems.private, certFile, selfSigned: true };
}

/** A certificate and key left from an interrupted renewal do not belong together: regenerate them. */
function keyMatchesCert(cert: string, key: string): boolean {
  try {
    return new X509Certificate(cert).checkPrivateKey(createPrivateKey(key));
  } catch {
    return false;
  }
}

/** When the certificate expires (ms); 0 for a file that is not a certificate: it is regenerated. */
function validUntil(cert: string): number {
  try {
    return Date.parse(new X509Certificate(cert).validTo);
  } catch {
    return 0;
  }
}
