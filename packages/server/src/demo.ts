/**
 * First run: on a fresh environment (no data sets at all) `serve` creates the data set `demo` and
 * a key for it, and prints a copy-paste command that sends one signed sample event. The secret is
 * printed once, on the terminal, never logged and never written in plain text anywhere.
 */
import { resolve } from 'node:path';
import type { ControlPlane, IssuedKey } from './control/control-plane.js';

export const DEMO_DATA_SET = 'demo';

export async function createDemoIfFresh(controlPlane: ControlPlane): Promise<IssuedKey | null> {
  if ((await controlPlane.listDataSets()).length > 0) return null;
  await controlPlane.createDataSet(DEMO_DATA_SET);
  return controlPlane.createKey([DEMO_DATA_SET]);
}

/**
 * The certificate's absolute path, quoted for bash: the command is pasted into another terminal,
 * often in another directory, where a relative path would not resolve (issue 31).
 */
function shellQuotedPath(file: string): string {
  return `'${resolve(file).replace(/'/g, `'\\''`)}'`;
}

/** A bash command: builds a sample event stamped now, signs it with openssl, posts it with curl. */
export function demoCurlCommand(options: { key: IssuedKey; host: string; port: number; certFile: string }): string {
  const host = options.host === '0.0.0.0' || options.host === '::' ? '127.0.0.1' : options.host;
  const url = `https://${host.includes(':') ? `[${host}]` : host}:${options.port}/v1/events`;
  const ds = options.key.dataSets[0]!;
  return [
    `TS=$(date +%s); BODY="{\\"data_set_id\\":\\"${ds}\\",\\"id\\":\\"demo-$TS\\",\\"timestamp\\":$TS,\\"event_type\\":\\"purchase\\",\\"value\\":42.5,\\"currency_code\\":\\"USD\\",\\"source\\":\\"website\\"}"`,
    `SIG=$(printf '%s' "$BODY" | openssl dgst -sha256 -hmac '${options.key.secret}' | sed 's/^.*= //')`,
    `curl -sS -w '\\nHTTP %{http_code}\\n' --tlsv1.3 --cacert ${shellQuotedPath(options.certFile)} -X POST '${url}' ` +
      `-H 'Content-Type: application/json' -H 'Accept: application/json' ` +
      `-H 'X-Service-Key-Id: ${options.key.keyId}' -H 'X-Service-Data-Set: ${ds}' -H "X-Service-Signature: $SIG" --data-binary "$BODY"`,
  ].join('; ');
}

export function demoBanner(options: { key: IssuedKey; host: string; port: number; certFile: string; env: string }): string {
  return [
    '',
    `First run (${options.env}): created data set "${options.key.dataSets[0]}" and a key for it.`,
    `  key id: ${options.key.keyId}`,
    `  secret: ${options.key.secret}   (shown once; stored encrypted)`,
    '',
    'Send a signed sample event (bash, curl, openssl):',
    '',
    demoCurlCommand(options),
    '',
  ].join('\n');
}

/** The operator console's address on the admin port, for the start banner. */
export function consoleUrl(adminHost: string, adminPort: number): string {
  const host = adminHost === '0.0.0.0' || adminHost === '::' ? '127.0.0.1' : adminHost;
  return `http://${host.includes(':') ? `[${host}]` : host}:${adminPort}/console/`;
}
