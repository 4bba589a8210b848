/**
 * The published OpenAPI document (packages/server/openapi.yaml), read through the real Redocly CLI:
 * `redocly bundle --ext json` turns the YAML into JSON (the project has no YAML parser of its own),
 * and `lint` runs the recommended rules. The CLI is run with telemetry off (redocly.yaml and the
 * environment) so that it makes no network request.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const SERVER_PACKAGE = fileURLToPath(new URL('../../../', import.meta.url));
export const OPENAPI_PATH = join(SERVER_PACKAGE, 'openapi.yaml');
const REDOCLY = join(dirname(createRequire(import.meta.url).resolve('@redocly/cli/package.json')), 'bin', 'cli.js');

/** Runs `redocly <args>` in packages/server; stdout and stderr together. */
export function redocly(args: readonly string[]): { status: number | null; output: string; stdout: string } {
  const result = spawnSync(process.execPath, [REDOCLY, ...args], {
    cwd: SERVER_PACKAGE,
    encoding: 'utf8',
    env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
  });
  if (result.error) throw result.error;
  return { status: result.status, stdout: result.stdout, output: `${result.stdout}${result.stderr}` };
}

export interface OpenApiDocument {
  readonly openapi: string;
  readonly paths: Record<string, Record<string, any>>;
  readonly components: { schemas: Record<string, unknown>; headers: Record<string, any>; responses: Record<string, any> };
  readonly [key: string]: unknown;
}

/** openapi.yaml as JSON (its own references kept), via `redocly bundle`. */
export function loadOpenApi(): OpenApiDocument {
  const dir = mkdtempSync(join(tmpdir(), 'ecapi-openapi-'));
  try {
    const out = join(dir, 'openapi.json');
    const run = redocly(['bundle', 'openapi.yaml', '--ext', 'json', '--output', out]);
    if (run.status !== 0) throw new Error(`redocly bundle failed:\n${run.output}`);
    return JSON.parse(readFileSync(out, 'utf8')) as OpenApiDocument;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
