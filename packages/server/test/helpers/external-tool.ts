/**
 * Command-line tools some tests run (promtool from Debian's `prometheus` package). Where one is
 * missing the tests fail in CI (CI set; .ci/run installs it) and are skipped locally with a message,
 * as the console tests do for Chromium.
 */
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import assert from 'node:assert/strict';

const inCi = Boolean(process.env.CI) && process.env.CI !== 'false' && process.env.CI !== '0';

function onPath(tool: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status === 0;
}

/** The `skip` option for tests that run `tool`: false when it is on PATH (or, in CI, a failing test). */
export function toolSkip(tool: string, debianPackage: string): false | string {
  if (onPath(tool)) return false;
  const message = `${tool} not on PATH: apt-get install -y ${debianPackage} (.ci/run does this)`;
  if (inCi) {
    test(`${tool} is installed`, () => assert.fail(message));
    return false;
  }
  process.stderr.write(`tests skipped: ${message}\n`);
  return message;
}

export interface ToolRun {
  readonly status: number | null;
  readonly output: string;
}

/** Runs a tool to completion; stdout and stderr together, for assertion messages. */
export function runTool(tool: string, args: readonly string[], options: { input?: string; cwd?: string } = {}): ToolRun {
  const result = spawnSync(tool, args, { input: options.input, cwd: options.cwd, encoding: 'utf8' });
  if (result.error) throw result.error;
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

