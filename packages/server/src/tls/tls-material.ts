/**
 * TLS material for the public port. Operators pass real files with --tls-cert / --tls-key; on a
 * fresh data dir the service generates a self-signed P-256 certificate for localhost, 127.0.0.1
 * and ::1 (with the `selfsigned` library, no openssl subprocess) and reuses it on later starts
 * until it comes within a week of expiry.
 */
import { X509Certificate } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generate } from 'selfsigned';

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
    if (Date.parse(new X509Certificate(cert).validTo) - Date.now() > RENEW_BEFORE_MS) {
      return { cert, key: readFileSync(keyFile, 'utf8'), certFile, selfSigned: true };
    }
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
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
  writeFileSync(keyFile, pems.private, { mode: 0o600 });
  writeFileSync(certFile, pems.cert, { mode: 0o644 });
  return { cert: pems.cert, key: pems.private, certFile, selfSigned: true };
}
