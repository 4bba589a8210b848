/**
 * The one door from this package to @ecapi-ingest/protocol. The published tarball carries the
 * protocol's compiled files inside dist/ (scripts/bundle-protocol.ts points this module's emitted
 * import at them), so `npm install` of the client alone is enough. The repository's build does
 * the same, so the repository's tests run the files that ship.
 */
export * from '@ecapi-ingest/protocol';
