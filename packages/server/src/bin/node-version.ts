/**
 * The Node.js version check every `ecapi-ingest` command runs first (bin/ecapi-ingest.ts), before
 * anything else is imported: on an older Node the native SQLite binding (better-sqlite3, built for
 * the N-API of Node >= 22.12) crashes the process with a bare "Segmentation fault" (exit 139)
 * instead of an error. Kept free of imports so that it loads on any Node that runs ES modules.
 *
 * MINIMUM_NODE is package.json's `engines.node` (a test keeps them equal).
 */
export const MINIMUM_NODE = '22.12.0';

/** [major, minor, patch] of "v20.19.2" / "22.12.0" (pre-release tags ignored), or null. */
export function parseNodeVersion(text: string): [number, number, number] | null {
  const match = /^v?(\d+)\.(\d+)\.(\d+)/.exec(text.trim());
  return match ? [Number(match[1]), Number(match[2]), Number(match[3])] : null;
}

/** Whether `version` is at least `minimum` (both as parseNodeVersion reads them; unreadable: false). */
export function atLeast(version: string, minimum: string): boolean {
  const v = parseNodeVersion(version);
  const m = parseNodeVersion(minimum);
  if (!v || !m) return false;
  for (let i = 0; i < 3; i++) if (v[i] !== m[i]) return v[i]! > m[i]!;
  return true;
}

/** The one line to print when this Node is too old (null when it will do). */
export function nodeVersionProblem(version: string, execPath: string): string | null {
  if (atLeast(version, MINIMUM_NODE)) return null;
  return (
    `error: ecapi-ingest needs Node.js ${MINIMUM_NODE} or later, and this is Node.js ${version} (${execPath}): ` +
    'install Node.js 24 LTS (the repository\'s .nvmrc) and run ecapi-ingest with it'
  );
}
