/**
 * Writes the generated reference pages (docs/reference/cli.md, configuration.md, errors.md,
 * metrics.md) from the code: `npm run docs` (builds first). Run it after changing a command, an
 * option, an error or a metric; npm test fails while a page differs from what this writes.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { renderReferenceDocs } from './docs/reference-docs.js';
import { REPO_ROOT } from './docs/repo-root.js';

for (const [path, content] of renderReferenceDocs()) {
  const file = join(REPO_ROOT, path);
  let before: string | null = null;
  try {
    before = readFileSync(file, 'utf8');
  } catch {
    // a new page
  }
  if (before === content) {
    console.log(`${path}: up to date`);
  } else {
    writeFileSync(file, content);
    console.log(`${path}: written`);
  }
}
