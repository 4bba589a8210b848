/**
 * The layer check (scripts/check-import-cycles.mjs, issue 32): the server's src stands in the order
 * docs/ARCHITECTURE.md writes down, and the check fails, naming the import, on an import up the
 * order, across one layer, in a cycle of files, or from a folder the order does not place. The
 * failing cases run the real script on a small src tree of their own with its own order.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../../../../', import.meta.url));
const SCRIPT = join(ROOT, 'scripts', 'check-import-cycles.mjs');

const ORDER = [
  '# Architecture', '', '## Layers', '', '<!-- layer-order:begin -->', '```text',
  'top/            # uses everything', 'left/ right/    # siblings', 'ground/ words.ts   # ground floor', '```',
  '<!-- layer-order:end -->', '',
].join('\n');

/** Runs the check on a src tree of `files` (path → text) with ORDER; its exit status and output. */
function check(files: Record<string, string>, order = ORDER): { status: number | null; output: string } {
  const dir = mkdtempSync(join(tmpdir(), 'ecapi-layer-check-'));
  try {
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, 'src', path)), { recursive: true });
      writeFileSync(join(dir, 'src', path), text);
    }
    writeFileSync(join(dir, 'ARCHITECTURE.md'), order);
    const run = spawnSync(process.execPath, [SCRIPT, join(dir, 'src'), `--architecture=${join(dir, 'ARCHITECTURE.md')}`], { encoding: 'utf8' });
    return { status: run.status, output: run.stdout + run.stderr };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const SOUND = {
  'words.ts': 'export const w = 1;\n',
  'ground/g.ts': 'export const g = 1;\n',
  'left/l.ts': "import { g } from '../ground/g.js';\nimport { w } from '../words.js';\nexport const l = g + w;\n",
  'right/r.ts': "import type { g } from '../ground/g.js';\nexport type R = typeof g;\n",
  'top/t.ts': "import { l } from '../left/l.js';\nimport type { R } from '../right/r.js';\nexport const t: R = l;\n",
};

test('the server stands in the layer order of docs/ARCHITECTURE.md', () => {
  const output = execFileSync(process.execPath, [SCRIPT], { encoding: 'utf8', cwd: ROOT });
  assert.match(output, /no import cycle, no import up or across the \d+ layers/);
});

test('a tree that keeps its order passes', () => {
  const { status, output } = check(SOUND);
  assert.equal(status, 0, output);
});

test('an import up the order fails, naming the file and what it imports', () => {
  const { status, output } = check({ ...SOUND, 'ground/g.ts': "import type { R } from '../right/r.js';\nexport const g = 1;\nexport type G = R;\n" });
  assert.equal(status, 1, output);
  assert.match(output, /upward import: ground\/g\.ts -> right\/r\.ts \(ground\/ is below right\/\)/);
  assert.match(output, /import cycle of 2 folders/);
});

test('an import between two entries of one layer fails', () => {
  const { status, output } = check({ ...SOUND, 'left/l.ts': "import type { R } from '../right/r.js';\nexport const l = 1;\nexport type L = R;\n" });
  assert.equal(status, 1, output);
  assert.match(output, /import between two entries of one layer: left\/l\.ts -> right\/r\.ts/);
});

test('a cycle of files inside one folder fails', () => {
  const { status, output } = check({
    ...SOUND,
    'top/a.ts': "import { b } from './b.js';\nexport const a = () => b;\n",
    'top/b.ts': "import { a } from './a.js';\nexport const b = () => a;\n",
  });
  assert.equal(status, 1, output);
  assert.match(output, /import cycle of 2 files:\n\s+top\/a\.ts -> top\/b\.ts\n\s+top\/b\.ts -> top\/a\.ts/);
});

test('a folder the order does not place, and an entry that does not exist, fail', () => {
  const { status, output } = check({ ...SOUND, 'extra/e.ts': 'export const e = 1;\n' }, ORDER.replace('top/ ', 'top/ gone/ '));
  assert.equal(status, 1, output);
  assert.match(output, /extra\/ is not in the layer order/);
  assert.match(output, /layer order names gone\/, which is not in/);
});

test('another src tree (the console) is checked for cycles only: no order applies, a cycle still fails', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ecapi-layer-check-'));
  try {
    writeFileSync(join(dir, 'a.ts'), "import { b } from './b.js';\nexport const a = () => b;\n");
    writeFileSync(join(dir, 'b.ts'), 'export const b = 1;\n');
    const sound = spawnSync(process.execPath, [SCRIPT, dir], { encoding: 'utf8' });
    assert.equal(sound.status, 0, sound.stdout + sound.stderr);
    assert.match(sound.stdout, /no import cycle among files or folders/);
    writeFileSync(join(dir, 'b.ts'), "import { a } from './a.js';\nexport const b = () => a;\n");
    const cyclic = spawnSync(process.execPath, [SCRIPT, dir], { encoding: 'utf8' });
    assert.equal(cyclic.status, 1, cyclic.stdout);
    assert.match(cyclic.stdout, /import cycle of 2 files/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
