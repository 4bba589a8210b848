#!/usr/bin/env node
// Inlines the ECAPI event schema into packages/server/openapi.yaml (run after changing the schema).
//
// The OpenAPI document is published self-contained: components.schemas holds the $defs of
// packages/protocol/schema/ecapi-event.schema.json with `#/$defs/X` rewritten to
// `#/components/schemas/X`. Everything after the marker comment in openapi.yaml is replaced.
// packages/server/test/contract/openapi-document.test.ts fails when the two differ, or when this
// script would write anything else than what is committed (`--check`: exit 1 and say so, write nothing).
//
// Why a YAML writer of its own (about 150 lines below) rather than a YAML library: the section is
// written in PyYAML's block style (safe_dump, width 120, the document's style since it was first
// generated), and a library lays out and folds differently, so every regeneration would rewrite the
// whole section; the project also has no YAML library. It writes only what JSON holds (objects,
// arrays, strings, integers, booleans, null) and refuses anything it would not write exactly as
// PyYAML does (a string that needs double quotes, a fractional number, a long or multi-line key).
// Usage: node scripts/inline-event-schema.mjs [--check]
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..');
const SCHEMA = join(ROOT, 'packages/protocol/schema/ecapi-event.schema.json');
const DOCUMENT = join(ROOT, 'packages/server/openapi.yaml');
const MARKER = '    # ---- ECAPI 1.0 event:';
const WIDTH = 120;

// --- PyYAML's plain-scalar resolution: a string that would read back as something else is quoted ---

const IMPLICIT = [
  // bool, float, int, merge, null, timestamp, value (yaml/resolver.py, re.X patterns with the blanks removed)
  /^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$/,
  /^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$/,
  /^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$/,
  /^(?:<<)$/,
  /^(?:~|null|Null|NULL|)$/,
  /^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$/,
  /^(?:=)$/,
];
/** The first characters each pattern is tried for (PyYAML looks a resolver up by the first character). */
const FIRST = ['yYnNtTfFoO', '-+0123456789.', '-+0123456789', '<', '~nN', '0123456789', '='];

function resolvesToString(text) {
  if (text === '') return false; // the null resolver's empty first character
  return !IMPLICIT.some((pattern, i) => FIRST[i].includes(text[0]) && pattern.test(text));
}

const BREAKS = '\n\x85\u2028\u2029';
const BLANKS = '\0 \t\r\n\x85\u2028\u2029';

/** emitter.py analyze_scalar: which styles may write `chars` (an array of code points). */
function analyze(chars) {
  if (chars.length === 0) return { empty: true, multiline: false, plain: false, single: true };
  let block = false;
  let lineBreaks = false;
  let special = false;
  let leadingSpace = false;
  let leadingBreak = false;
  let trailingSpace = false;
  let trailingBreak = false;
  let breakSpace = false;
  let spaceBreak = false;
  const text = chars.join('');
  if (text.startsWith('---') || text.startsWith('...')) block = true;
  let precededByWhitespace = true;
  let followedByWhitespace = chars.length === 1 || BLANKS.includes(chars[1]);
  let previousSpace = false;
  let previousBreak = false;
  for (let index = 0; index < chars.length; index++) {
    const ch = chars[index];
    if (index === 0) {
      if ('#,[]{}&*!|>\'"%@`'.includes(ch)) block = true;
      if ('?:'.includes(ch) && followedByWhitespace) block = true;
      if (ch === '-' && followedByWhitespace) block = true;
    } else if ((ch === ':' && followedByWhitespace) || (ch === '#' && precededByWhitespace)) block = true;
    if (BREAKS.includes(ch)) lineBreaks = true;
    if (!(ch === '\n' || (ch >= ' ' && ch <= '~'))) {
      const unicode = (ch === '\x85' || (ch >= '\xA0' && ch <= '\uD7FF') || (ch >= '\uE000' && ch <= '\uFFFD') || (ch.codePointAt(0) >= 0x10000 && ch.codePointAt(0) < 0x10ffff)) && ch !== '\uFEFF';
      if (!unicode) special = true; // allow_unicode: other characters are written as they are
    }
    if (ch === ' ') {
      if (index === 0) leadingSpace = true;
      if (index === chars.length - 1) trailingSpace = true;
      if (previousBreak) breakSpace = true;
      previousSpace = true;
      previousBreak = false;
    } else if (BREAKS.includes(ch)) {
      if (index === 0) leadingBreak = true;
      if (index === chars.length - 1) trailingBreak = true;
      if (previousSpace) spaceBreak = true;
      previousSpace = false;
      previousBreak = true;
    } else {
      previousSpace = false;
      previousBreak = false;
    }
    precededByWhitespace = BLANKS.includes(ch);
    followedByWhitespace = index + 2 >= chars.length || BLANKS.includes(chars[index + 2]);
  }
  let plain = !(leadingSpace || leadingBreak || trailingSpace || trailingBreak || lineBreaks || block);
  let single = true;
  if (breakSpace) plain = single = false;
  if (spaceBreak || special) plain = single = false;
  return { empty: false, multiline: lineBreaks, plain, single };
}

// --- the writer: emitter.py's block style for JSON values (indent 2, indentless sequences in mappings) ---

class Writer {
  out = [];
  column = 0;
  whitespace = true;
  indention = true;
  indent = null;
  indents = [];

  write(data) {
    this.out.push(data);
    this.column += [...data].length;
  }

  lineBreak(data = '\n') {
    this.whitespace = true;
    this.indention = true;
    this.column = 0;
    this.out.push(data);
  }

  writeIndent() {
    const indent = this.indent ?? 0;
    if (!this.indention || this.column > indent || (this.column === indent && !this.whitespace)) this.lineBreak();
    if (this.column < indent) {
      this.whitespace = true;
      this.out.push(' '.repeat(indent - this.column));
      this.column = indent;
    }
  }

  indicator(indicator, needWhitespace, whitespace = false, indention = false) {
    const data = this.whitespace || !needWhitespace ? indicator : ` ${indicator}`;
    this.whitespace = whitespace;
    this.indention = this.indention && indention;
    this.write(data);
  }

  increaseIndent(flow, indentless = false) {
    this.indents.push(this.indent);
    if (this.indent === null) this.indent = flow ? 2 : 0;
    else if (!indentless) this.indent += 2;
  }

  /** A node; `context`: 'root', 'sequence', 'mapping' (a key or a value) or 'key'. */
  node(value, context) {
    if (Array.isArray(value)) {
      if (value.length === 0) return this.emptyFlow('[', ']');
      this.increaseIndent(false, context !== 'sequence' && context !== 'root' && !this.indention);
      for (const item of value) {
        this.writeIndent();
        this.indicator('-', true, false, true);
        this.node(item, 'sequence');
      }
      this.indent = this.indents.pop();
    } else if (value !== null && typeof value === 'object') {
      const entries = Object.entries(value);
      if (entries.length === 0) return this.emptyFlow('{', '}');
      this.increaseIndent(false);
      for (const [key, item] of entries) {
        this.writeIndent();
        this.node(key, 'key');
        this.indicator(':', false);
        this.node(item, 'mapping');
      }
      this.indent = this.indents.pop();
    } else {
      this.increaseIndent(true);
      this.scalar(value, context === 'key');
      this.indent = this.indents.pop();
    }
  }

  emptyFlow(open, close) {
    this.indicator(open, true, true);
    this.increaseIndent(true);
    this.indent = this.indents.pop();
    this.indicator(close, false);
  }

  scalar(value, simpleKey) {
    if (typeof value === 'string') {
      const chars = [...value];
      const analysis = analyze(chars);
      if (simpleKey && (analysis.empty || analysis.multiline || chars.length + 5 >= 128)) throw new Error(`key ${JSON.stringify(value)} would not be a simple key`);
      if (analysis.plain && resolvesToString(value)) return this.plain(chars, !simpleKey);
      if (analysis.single) return this.singleQuoted(chars, !simpleKey);
      throw new Error(`${JSON.stringify(value)} would need double quotes: not supported`);
    }
    if (typeof value === 'number') {
      if (!Number.isSafeInteger(value)) throw new Error(`${value}: only integers are supported`);
      return this.plain([...String(value)], !simpleKey);
    }
    if (typeof value === 'boolean' || value === null) return this.plain([...String(value)], !simpleKey);
    throw new Error(`unsupported value ${String(value)}`);
  }

  plain(chars, split) {
    if (chars.length === 0) return;
    if (!this.whitespace) this.write(' ');
    this.whitespace = false;
    this.indention = false;
    let spaces = false;
    let start = 0;
    for (let end = 0; end <= chars.length; end++) {
      const ch = end < chars.length ? chars[end] : null;
      if (spaces) {
        if (ch !== ' ') {
          if (start + 1 === end && this.column > WIDTH && split) {
            this.writeIndent();
            this.whitespace = false;
            this.indention = false;
          } else this.write(chars.slice(start, end).join(''));
          start = end;
        }
      } else if (ch === null || ` ${BREAKS}`.includes(ch)) {
        this.write(chars.slice(start, end).join(''));
        start = end;
      }
      if (ch !== null) spaces = ch === ' ';
    }
  }

  singleQuoted(chars, split) {
    this.indicator("'", true);
    let spaces = false;
    let breaks = false;
    let start = 0;
    for (let end = 0; end <= chars.length; end++) {
      const ch = end < chars.length ? chars[end] : null;
      if (spaces) {
        if (ch === null || ch !== ' ') {
          if (start + 1 === end && this.column > WIDTH && split && start !== 0 && end !== chars.length) this.writeIndent();
          else this.write(chars.slice(start, end).join(''));
          start = end;
        }
      } else if (breaks) {
        if (ch === null || !BREAKS.includes(ch)) {
          if (chars[start] === '\n') this.lineBreak();
          for (const br of chars.slice(start, end)) this.lineBreak(br);
          this.writeIndent();
          start = end;
        }
      } else if (ch === null || ` ${BREAKS}`.includes(ch) || ch === "'") {
        if (start < end) {
          this.write(chars.slice(start, end).join(''));
          start = end;
        }
      }
      if (ch === "'") {
        this.write("''");
        start = end + 1;
      }
      if (ch !== null) {
        spaces = ch === ' ';
        breaks = BREAKS.includes(ch);
      }
    }
    this.indicator("'", false);
  }
}

/** yaml.safe_dump(value, sort_keys=False, allow_unicode=True, width=120, default_flow_style=False). */
export function dumpYaml(value) {
  const writer = new Writer();
  writer.node(value, 'root');
  writer.writeIndent(); // the document's end
  return writer.out.join('');
}

function rewrite(node) {
  if (Array.isArray(node)) return node.map(rewrite);
  if (node !== null && typeof node === 'object') {
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, k === '$ref' && typeof v === 'string' ? v.replace(/^#\/\$defs\//, '#/components/schemas/') : rewrite(v)]));
  }
  return node;
}

function inlinedDocument() {
  const schemaText = readFileSync(SCHEMA, 'utf8');
  // JSON.parse reads 1.0 as 1 where Python keeps a float: refuse fractions and exponents rather than guess.
  if (/[0-9][.eE]/.test(schemaText.replace(/"(?:[^"\\]|\\.)*"/g, '""'))) throw new Error('the schema has a non-integer number: not supported');
  const defs = JSON.parse(schemaText).$defs;
  // JavaScript orders integer-like keys first; JSON (and PyYAML) keep the written order.
  const integerKey = (node) =>
    Array.isArray(node) ? node.some(integerKey) : node !== null && typeof node === 'object' && (Object.keys(node).some((k) => /^(0|[1-9][0-9]*)$/.test(k)) || Object.values(node).some(integerKey));
  if (integerKey(defs)) throw new Error('the schema has an integer-like key: not supported');
  const body = dumpYaml(rewrite(defs));
  const indented = `${body.split('\n').map((line) => (line ? `    ${line}` : line)).join('\n').trimEnd()}\n`;
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
