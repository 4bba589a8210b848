#!/usr/bin/env node
// Import cycles among the server's modules (issue 19): every relative import of packages/server/src,
// type-only imports included (a cycle of types is still two modules that cannot be understood apart),
// as strongly connected components of the module graph (Tarjan). Prints each cycle's files and exits 1
// when there is one. Uses the TypeScript compiler already in devDependencies: no new dependency.
// With --directories the nodes are the top-level folders of src (storage/, queue/, consumer/…;
// files directly in src count as one node each): a folder that serves storage/ must not import it back.
// --folder=<name> (with --directories): only cycles through that folder count (storage/ may sit in
// none: the stores it composes never import it back).
// Usage: node scripts/check-import-cycles.mjs [--directories [--folder=storage]] [src dir]
import { readdirSync, readFileSync, statSync, existsSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

const args = process.argv.slice(2);
const byDirectory = args.includes('--directories');
const folder = args.find((a) => a.startsWith('--folder='))?.slice('--folder='.length);
const root = resolve(args.find((a) => !a.startsWith('--')) ?? join(import.meta.dirname, '..', 'packages', 'server', 'src'));
/** The graph node of a file: itself, or its top-level folder with --directories. */
const nodeOf = (file) => (byDirectory ? relative(root, file).split('/')[0] : file);
const files = [];
(function walk(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path);
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) files.push(path);
  }
})(root);

const edges = new Map();
/** Why each edge exists (one importing file), for the report. */
const because = new Map();
for (const file of files) {
  const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
  const from = nodeOf(file);
  if (!edges.has(from)) edges.set(from, []);
  for (const { fileName } of importedFiles) {
    if (!fileName.startsWith('.')) continue;
    const target = resolve(dirname(file), fileName.replace(/\.js$/, '.ts'));
    if (!existsSync(target)) continue;
    const to = nodeOf(target);
    if (to === from && byDirectory) continue;
    if (!edges.get(from).includes(to)) edges.get(from).push(to);
    if (!because.has(`${from} ${to}`)) because.set(`${from} ${to}`, relative(root, file));
  }
}
const nodes = [...edges.keys()];

// Tarjan's strongly connected components.
let index = 0;
const stack = [];
const meta = new Map();
const cycles = [];
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
    const cyclic = component.length > 1 || (edges.get(v) ?? []).includes(v);
    if (cyclic && (folder === undefined || component.includes(folder))) cycles.push(component);
  }
}
for (const node of nodes) if (!meta.has(node)) connect(node);

if (cycles.length === 0) {
  console.log(`no import cycles${folder ? ` through ${folder}/` : ''} among the ${nodes.length} ${byDirectory ? 'folders' : 'modules'} of ${relative(process.cwd(), root) || '.'}`);
} else {
  for (const component of cycles) {
    console.log(`cycle of ${component.length}:`);
    const name = (node) => (byDirectory ? node : relative(root, node));
    for (const node of component.sort()) {
      const into = (edges.get(node) ?? []).filter((to) => component.includes(to));
      console.log(`  ${name(node)} -> ${into.map((to) => `${name(to)} (${because.get(`${node} ${to}`)})`).join(', ')}`);
    }
  }
  process.exitCode = 1;
}
