#!/usr/bin/env node
import { main } from '../cli/main.js';

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
