/**
 * Every `ecapi-ingest …` command line written by hand in the Markdown (README, guides, design notes,
 * package READMEs) is one the program accepts: its command path exists and each --flag is an option
 * of that command or of the program. The generated CLI reference is left out (its own drift test
 * covers it).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { buildProgram } from '../../src/cli/main.js';
import { checkCommandLine, unknownUsages } from '../../scripts/docs/documented-commands.js';
import { markdownFiles } from '../../scripts/docs/markdown-links.js';
import { REPO_ROOT } from '../../scripts/docs/repo-root.js';

test('every ecapi-ingest command and flag named in the docs exists', () => {
  const files = markdownFiles(REPO_ROOT).filter((f) => f !== join(REPO_ROOT, 'docs', 'reference', 'cli.md'));
  assert.ok(files.some((f) => f.endsWith(join('docs', 'guides', 'operator.md'))), `found the guides: ${files.length} files`);
  const { checked, unknown } = unknownUsages(REPO_ROOT, files);
  assert.ok(checked > 100, `found the command lines of the docs: ${checked}`);
  assert.deepEqual(
    unknown.map((u) => `${u.file}:${u.line}: \`${u.usage}\`: ${u.reason}`),
    [],
    'fix these command lines (see `ecapi-ingest <command> --help` or docs/reference/cli.md)',
  );
});

test('the check refuses an unknown command or flag and accepts real ones', () => {
  const { program } = buildProgram();
  const check = (line: string) => checkCommandLine(program, line.split(' '));
  assert.equal(check('--json key create --data-set acme-web'), null);
  assert.equal(check('--env test send --demo'), null);
  assert.equal(check('identities get --identifier email:abc demo'), null);
  assert.equal(check('serve --no-demo --port 8443'), null);
  assert.equal(check('events get demo <id>'), null);
  assert.equal(check('key create --dataset acme-web'), '`ecapi-ingest key create` has no option --dataset');
  assert.equal(check('sned --demo'), 'the program has no command sned');
  assert.equal(check('key rotat key_1'), '`ecapi-ingest key` has no command rotat');
});
