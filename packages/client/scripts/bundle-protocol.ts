/**
 * Makes the client's dist/ self-contained, so `npm pack` of packages/client gives a tarball that
 * installs alone: copies the compiled @ecapi-ingest/protocol (dist/src/*.js, *.d.ts) into
 * dist/src/vendor/protocol/ and its schema into dist/src/schema/ (event-schema.js finds it at
 * ../../schema relative to itself, as in the protocol package), then points
 * dist/src/protocol.js and .d.ts, the client's only import of the protocol (src/protocol.ts), at
 * the copy.
 *
 * Why a copy and not a dependency: the protocol package is not published on its own, npm's
 * bundleDependencies does not pick up a hoisted workspace package, and the project runs no
 * lifecycle scripts (.npmrc ignore-scripts, so no prepack). The root `npm run build` runs this
 * after tsc; the packed-install test checks the tarball has no @ecapi-ingest/protocol dependency.
 *
 *   node packages/client/dist/scripts/bundle-protocol.js
 */
import { copyFileSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SPECIFIER = "'@ecapi-ingest/protocol'";
const VENDORED = "'./vendor/protocol/index.js'";

export function bundleProtocol(clientDist: string): void {
  // The workspace package beside this one (this script runs from packages/client/dist/scripts).
  const protocolRoot = fileURLToPath(new URL('../../../protocol/', import.meta.url));
  const from = join(protocolRoot, 'dist', 'src');
  const to = join(clientDist, 'src', 'vendor', 'protocol');
  mkdirSync(to, { recursive: true });
  for (const name of readdirSync(from)) {
    if (/\.(js|d\.ts)$/.test(name)) copyFileSync(join(from, name), join(to, name));
  }
  mkdirSync(join(clientDist, 'src', 'schema'), { recursive: true });
  copyFileSync(join(protocolRoot, 'schema', 'ecapi-event.schema.json'), join(clientDist, 'src', 'schema', 'ecapi-event.schema.json'));
  for (const name of ['protocol.js', 'protocol.d.ts']) {
    const file = join(clientDist, 'src', name);
    const text = readFileSync(file, 'utf8');
    if (text.includes(VENDORED)) continue; // already pointed (tsc did not re-emit it)
    if (!text.includes(SPECIFIER)) throw new Error(`${file}: no import of ${SPECIFIER} to point at the bundled copy`);
    writeFileSync(file, text.replaceAll(SPECIFIER, VENDORED));
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  bundleProtocol(fileURLToPath(new URL('../', import.meta.url)));
}
