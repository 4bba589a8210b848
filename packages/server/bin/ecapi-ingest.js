#!/usr/bin/env node
// The `ecapi-ingest` command. The CLI itself is compiled into dist/ by `npm start`, `npm test` or
// `npm run build` (npm ci runs no scripts: .npmrc); a bin pointing into dist/ would not exist when
// npm links package bins, and npm would skip it. This shim is in the source tree, so the command is
// always linked, and it says what to do when dist/ has not been built yet. The CLI is imported
// dynamically: its entry (src/bin/ecapi-ingest.ts) checks the Node.js version before it loads
// anything native, so an older Node gets one line saying what to install, not a segmentation fault.
import { existsSync } from 'node:fs';

const cli = new URL('../dist/src/bin/ecapi-ingest.js', import.meta.url);
if (!existsSync(cli)) {
  process.stderr.write('ecapi-ingest is not built yet: run `npm run build` (or `npm start`) in the repository first\n');
  process.exit(1);
}
await import(cli.href);
