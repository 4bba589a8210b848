#!/usr/bin/env node
// The structure of the server's modules (issues 19 and 32), from every relative import of
// packages/server/src, type-only imports included (a cycle of types is still two modules that cannot
// be understood apart). Fails (exit 1) on:
// - an import cycle among files, or among folders (strongly connected components, Tarjan);
// - an import that runs up the layer order, or sideways between two entries of one layer (siblings
//   are independent);
// - a folder or top-level file of src that the order does not place, or an entry of the order that
//   does not exist.
// The layer order is read from docs/ARCHITECTURE.md, section "Layers", the fenced block between
// `<!-- layer-order:begin -->` and `<!-- layer-order:end -->`: one layer per line, top first, each
// line its entries (a folder of src as `name/`, a file directly in src as `name.ts`), then
// `#` and what the layer is. A folder's node is its top-level folder (consumer/…/x.ts is consumer/).
// The block between `<!-- layer-exceptions:begin -->` and `<!-- layer-exceptions:end -->` may
// list imports tolerated for now, as `from.ts -> to.ts  # why` (paths relative to src); an
// exception that no longer exists fails too, so the list only shrinks.
// Another src dir (the console's page modules, packages/server/console/src) is checked for cycles
// only, unless --architecture names the document holding its order.
// Uses the TypeScript compiler already in devDependencies (its import scanner): no new dependency.
// Usage: node scripts/check-import-cycles.mjs [src dir] [--architecture=docs/ARCHITECTURE.md]
import { readdirSync, readFileSync, statSync, existsSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

const args = process.argv.slice(2);
const repo = join(import.meta.dirname, '..');
const serverSrc = join(repo, 'packages', 'server', 'src');
const root = resolve(args.find((a) => !a.startsWith('--')) ?? serverSrc);
const architectureArg = args.find((a) => a.startsWith('--architecture='))?.slice('--architecture='.length);
const architecture = resolve(architectureArg ?? join(repo, 'docs', 'ARCHITECTURE.md'));
/** Whether a layer order applies: the server's src, or a tree whose document is named. */
const withLayers = root === resolve(serverSrc) || architectureArg !== undefined;
const problems = [];

// ---------------------------------------------------------------------------------------------
// The written order

function block(text, name) {
  const begin = text.indexOf(`<!-- ${name}:begin -->`);
  const end = text.indexOf(`<!-- ${name}:end -->`);
  if (begin < 0 || end < begin) return null;
  return text
    .slice(begin, end)
    .split('\n')
    .slice(1)
    .filter((line) => !line.startsWith('```'))
    .map((line) => line.split('#')[0].trim())
    .filter((line) => line !== '');
}
const doc = withLayers ? readFileSync(architecture, 'utf8') : '';
const layerLines = withLayers ? block(doc, 'layer-order') : [];
if (withLayers && (!layerLines || layerLines.length === 0)) {
  console.log(`${relative(process.cwd(), architecture)}: no layer order (<!-- layer-order:begin --> … <!-- layer-order:end -->)`);
  process.exit(1);
}
/** Node → rank; the ground floor (last line) is 0. */
const rank = new Map();
layerLines.forEach((line, i) => {
  for (const entry of line.split(/\s+/)) {
    const node = entry.replace(/\/$/, '');
    if (rank.has(node)) problems.push(`layer order: ${entry} is placed twice`);
    rank.set(node, layerLines.length - 1 - i);
  }
});
const exceptions = new Map();
for (const line of block(doc, 'layer-exceptions') ?? []) {
  const [from, to] = line.split('->').map((s) => s.trim());
  exceptions.set(`${from} ${to}`, false);
}

// ---------------------------------------------------------------------------------------------
// The graph

/** The node of a file: its top-level folder, or itself when it sits directly in src. */
const nodeOf = (file) => relative(root, file).split('/')[0];
const files = [];
(function walk(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path);
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) files.push(path);
  }
})(root);

const fileEdges = new Map();
const folderEdges = new Map();
/** Why each folder edge exists (one importing file and what it imports), for the report. */
const because = new Map();
for (const file of files) {
  const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
  const from = nodeOf(file);
  if (!fileEdges.has(file)) fileEdges.set(file, []);
  if (!folderEdges.has(from)) folderEdges.set(from, []);
  for (const { fileName } of importedFiles) {
    if (!fileName.startsWith('.')) continue;
    const target = resolve(dirname(file), fileName.replace(/\.js$/, '.ts'));
    if (!existsSync(target)) continue;
    if (!fileEdges.get(file).includes(target)) fileEdges.get(file).push(target);
    const to = nodeOf(target);
    if (to === from) continue;
    const edge = `${relative(root, file)} -> ${relative(root, target)}`;
    if (exceptions.has(`${relative(root, file)} ${relative(root, target)}`)) {
      exceptions.set(`${relative(root, file)} ${relative(root, target)}`, true);
      continue;
    }
    if (!folderEdges.get(from).includes(to)) folderEdges.get(from).push(to);
    if (!because.has(`${from} ${to}`)) because.set(`${from} ${to}`, edge);
    if (!withLayers) continue;
    const [a, b] = [rank.get(from), rank.get(to)];
    if (a === undefined || b === undefined) continue; // reported below
    if (b > a) problems.push(`upward import: ${edge} (${label(from)} is below ${label(to)})`);
    else if (b === a) problems.push(`import between two entries of one layer: ${edge} (${label(from)} and ${label(to)} are siblings)`);
  }
}
function label(node) {
  return node.endsWith('.ts') ? node : `${node}/`;
}

for (const node of withLayers ? folderEdges.keys() : []) {
  if (!rank.has(node)) problems.push(`${label(node)} is not in the layer order of ${relative(process.cwd(), architecture)}: place it`);
}
for (const node of rank.keys()) {
  if (!folderEdges.has(node)) problems.push(`layer order names ${label(node)}, which is not in ${relative(process.cwd(), root)}`);
}
for (const [edge, seen] of exceptions) {
  if (!seen) problems.push(`layer exception ${edge.replace(' ', ' -> ')} no longer exists: remove it from ${relative(process.cwd(), architecture)}`);
}

// Tarjan's strongly connected components.
function cycles(edges) {
  let index = 0;
  const stack = [];
  const meta = new Map();
  const found = [];
  function connect(v) {
    meta.set(v, { index, low: index, onStack: true });
    index++;
    stack.push(v);
    for (const w of edges.get(v) ?? []) {
      if (!meta.has(w)) {
        connect(w);
        meta.get(v).low = Math.min(meta.get(v).low, meta.get(w).low);
      } else if (meta.get(w).onStack) {
        meta.get(v).low = Math.min(meta.get(v).low, meta.get(w).index);
      }
    }
    if (meta.get(v).low === meta.get(v).index) {
      const component = [];
      let w;
      do {
        w = stack.pop();
        meta.get(w).onStack = false;
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (edges.get(v) ?? []).includes(v)) found.push(component);
    }
  }
  for (const node of edges.keys()) if (!meta.has(node)) connect(node);
  return found;
}
for (const component of cycles(fileEdges)) {
  const lines = component.sort().map((f) => `    ${relative(root, f)} -> ${fileEdges.get(f).filter((t) => component.includes(t)).map((t) => relative(root, t)).join(', ')}`);
  problems.push(`import cycle of ${component.length} files:\n${lines.join('\n')}`);
}
for (const component of cycles(folderEdges)) {
  if (component.every((n) => n.endsWith('.ts'))) continue; // files directly in src: reported as a file cycle above
  const lines = component.sort().map((n) => `    ${label(n)} -> ${folderEdges.get(n).filter((t) => component.includes(t)).map((t) => `${label(t)} (${because.get(`${n} ${t}`)})`).join(', ')}`);
  problems.push(`import cycle of ${component.length} folders:\n${lines.join('\n')}`);
}

if (problems.length === 0 && !withLayers) {
  console.log(`${files.length} modules of ${relative(process.cwd(), root) || '.'}: no import cycle among files or folders`);
} else if (problems.length === 0) {
  console.log(
    `${files.length} modules of ${relative(process.cwd(), root) || '.'} in ${folderEdges.size} folders and files: no import cycle, ` +
      `no import up or across the ${layerLines.length} layers of ${relative(process.cwd(), architecture)}` +
      (exceptions.size > 0 ? ` (${exceptions.size} listed exception${exceptions.size > 1 ? 's' : ''})` : ''),
  );
} else {
  for (const problem of problems) console.log(problem);
  process.exitCode = 1;
}
