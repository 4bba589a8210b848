/**
 * Every relative link of the repository's Markdown (README.md, docs/…, the packages' READMEs, the
 * design notes, bench results) resolves: its file exists and its #anchor is a heading of the target,
 * by GitHub's slugs. External links are not fetched.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { brokenLinks, extractLinks, headingAnchors, markdownFiles } from '../../scripts/docs/markdown-links.js';

const ROOT = fileURLToPath(new URL('../../../../../', import.meta.url));

test('every relative link and anchor in the Markdown files resolves', () => {
  const files = markdownFiles(ROOT);
  assert.ok(files.some((f) => f.endsWith('/README.md')) && files.length > 10, `found the Markdown files: ${files.length}`);
  const broken = brokenLinks(ROOT, files);
  assert.deepEqual(
    broken.map((b) => `${b.file}:${b.line}: ${b.href}: ${b.reason}`),
    [],
    'fix these links (anchors are GitHub heading slugs)',
  );
});

test('links are taken as GitHub renders them: not inside code, reference links and images included', () => {
  const text = [
    '# Title', '', 'See [a](a.md#x) and ![img](i.png) and `[not](code.md)` and [ref][r].', '',
    '```', '[not](fenced.md)', '```', '', '[r]: ref.md', '',
  ].join('\n');
  assert.deepEqual(extractLinks(text).map((l) => l.href), ['a.md#x', 'i.png', 'ref.md']);
});

test('heading anchors follow GitHub slugs', () => {
  const anchors = headingAnchors('# Scale out: stateless nodes on PostgreSQL\n## `ecapi-ingest send`\n## Notes\n## Notes\n## Node.js 20 → 24 (issue 14)\n');
  assert.deepEqual([...anchors], ['scale-out-stateless-nodes-on-postgresql', 'ecapi-ingest-send', 'notes', 'notes-1', 'nodejs-20--24-issue-14']);
});
