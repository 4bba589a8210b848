#!/usr/bin/env node
// The Node.js version is checked before anything else is loaded: the CLI's static imports reach the
// native SQLite binding, which crashes an older Node (Segmentation fault) before any error could be
// printed. Hence a dynamic import of the CLI after the check (issue 29).
import { nodeVersionProblem } from './node-version.js';

const problem = nodeVersionProblem(process.version, process.execPath);
if (problem) {
  process.stderr.write(`${problem}\n`);
  process.exit(1);
}

const { main } = await import('../cli/main.js');

// Everything the service creates in the data dir is private (0600 files, 0700 directories) whatever
// the operator's umask: the explicit modes of fs/durable-files.ts cover our own files, this covers
// files created by libraries too (SQLite's databases, -wal and -shm). Issue 16, point 5.
process.umask(0o077);

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`error: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);
