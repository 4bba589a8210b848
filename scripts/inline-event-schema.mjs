#!/usr/bin/env node
// Inlines the ECAPI event schema into packages/server/openapi.yaml (run after changing the schema).
//
// The OpenAPI document is published self-contained: components.schemas holds the $defs of
// packages/protocol/schema/ecapi-event.schema.json with `#/$defs/X` rewritten to
// `#/components/schemas/X`. Everything after the marker comment in openapi.yaml is replaced.
// packages/server/test/contract/openapi-document.test.ts fails when the two differ, or when this
// script would write anything else than what is committed (`--check`: exit 1 and say so, write nothing).
//
// The section is written by the `yaml` package (eemeli/yaml, a root devDependency) in place of a
// hand-written YAML writer: the library decides which strings need quotes (a string "true", "1.0",
// "null", "#x" ...), the part a writer of our own gets wrong. The output is YAML 1.2, as OpenAPI 3.1
// recommends, with the strings a YAML 1.1 reader would take for something else (`yes`, `on`,
// `2024-01-01`) quoted too; before anything is written it is read back under YAML 1.2 and 1.1 and
// must equal the schema, or the script stops. Layout: block style, sequences indented under their key like the hand-written part of the
// document, single quotes where quotes are needed, long strings folded at 116 columns (120 with the
// section's 4-space indent; the library counts a value's first line from after its key, so that
// line can run past by the key's length), no anchors. A library upgrade that lays out differently
// makes `--check` fail until this script is rerun; the meaning stays (the contract test compares
// the parsed values). Key order is the schema's, except that JavaScript puts integer-like keys first.
// Usage: node scripts/inline-event-schema.mjs [--check]
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { Document, parse, Scalar, visit } from 'yaml';

const ROOT = join(import.meta.dirname, '..');
const SCHEMA = join(ROOT, 'packages/protocol/schema/ecapi-event.schema.json');
const DOCUMENT = join(ROOT, 'packages/server/openapi.yaml');
const MARKER = '    # ---- ECAPI 1.0 event:';
const INDENT = '    '; // components.schemas.<name>

/** Whether a plain `text` would be read as something else than this string by a YAML 1.1 reader. */
function ambiguousInYaml11(text) {
  try {
    return parse(text, { version: '1.1' }) !== text;
  } catch {
    return true;
  }
}

/** The YAML of the event schema's $defs, at the document's top level (indented by the caller). */
export function eventSchemaYaml(defs) {
  const document = new Document(defs, { aliasDuplicateObjects: false });
  visit(document, {
    Scalar(_, node) {
      if (typeof node.value === 'string' && ambiguousInYaml11(node.value)) node.type = Scalar.QUOTE_SINGLE;
    },
  });
  const text = document.toString({
    indent: 2,
    indentSeq: true,
    collectionStyle: 'block',
    singleQuote: true,
    lineWidth: 120 - INDENT.length,
    minContentWidth: 40,
  });
  for (const version of ['1.2', '1.1']) {
    if (!isDeepStrictEqual(parse(text, { version }), defs)) throw new Error(`the written schema would read back differently under YAML ${version}`);
  }
  return text;
}

function rewrite(node) {
  if (Array.isArray(node)) return node.map(rewrite);
  if (node !== null && typeof node === 'object') {
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, k === '$ref' && typeof v === 'string' ? v.replace(/^#\/\$defs\//, '#/components/schemas/') : rewrite(v)]));
  }
  return node;
}

function inlinedDocument() {
  const defs = JSON.parse(readFileSync(SCHEMA, 'utf8')).$defs;
  const body = eventSchemaYaml(rewrite(defs));
  const indented = `${body.split('\n').map((line) => (line ? `${INDENT}${line}` : line)).join('\n').trimEnd()}\n`;
  const text = readFileSync(DOCUMENT, 'utf8');
  const at = text.indexOf(MARKER);
  if (at === -1) throw new Error(`${DOCUMENT}: marker "${MARKER.trim()}" not found`);
  const marker =
    `${MARKER} the $defs of @ecapi-ingest/protocol/schema/ecapi-event.schema.json, inlined\n` +
    '    # (#/$defs/X -> #/components/schemas/X). Regenerate with scripts/inline-event-schema.mjs;\n' +
    '    # test/contract/openapi-document.test.ts fails when the two differ.\n';
  return { before: text, after: text.slice(0, at) + marker + indented };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { before, after } = inlinedDocument();
  if (process.argv.includes('--check')) {
    if (before !== after) {
      console.error('packages/server/openapi.yaml differs from what scripts/inline-event-schema.mjs writes: run it');
      process.exit(1);
    }
    console.log('packages/server/openapi.yaml: the inlined event schema is current');
  } else if (before !== after) {
    writeFileSync(DOCUMENT, after);
    console.log('packages/server/openapi.yaml: event schema inlined');
  } else console.log('packages/server/openapi.yaml: already current');
}
