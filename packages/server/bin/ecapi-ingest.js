#!/usr/bin/env node
// The `ecapi-ingest` command. The CLI itself is compiled into dist/ by `npm ci` (the root prepare
// script), after npm has linked package bins; a bin pointing into dist/ would not exist at link time
// and npm would skip it. This shim is in the source tree, so the command is always linked.
import '../dist/src/bin/ecapi-ingest.js';
