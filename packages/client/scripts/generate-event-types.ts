/**
 * Generates src/event-types.generated.ts from the ECAPI 1.0 event JSON Schema published in
 * @ecapi-ingest/protocol: the schema the server validates with is the one source of truth for the
 * sender's types. A test regenerates the file in memory and fails when the committed copy is stale.
 *
 *   npm run build && npm run generate -w packages/client
 *
 * Only the schema keywords the ECAPI schema uses are supported; anything else fails loudly, so a
 * schema change can never silently produce a laxer type.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { loadEventSchema } from '@ecapi-ingest/protocol';

type Schema = Record<string, any>;

export const SCHEMA_SPECIFIER = '@ecapi-ingest/protocol/schema/ecapi-event.schema.json';
/** Where the generated file lives, relative to this script's compiled location (dist/scripts). */
export const GENERATED_FILE = fileURLToPath(new URL('../../src/event-types.generated.ts', import.meta.url));

export function loadSchema(): Schema {
  return loadEventSchema() as Schema;
}

/** Keywords that only document or constrain values in ways TypeScript cannot express. */
const ANNOTATIONS = new Set(['description', 'title', 'pattern', 'format', 'minLength', 'minimum', 'maximum', '$schema', '$id']);

function doc(text: string | undefined, indent: string, extra: string[] = []): string {
  const lines = [...(text ? [text] : []), ...extra];
  if (lines.length === 0) return '';
  if (lines.length === 1 && !lines[0]!.includes('*/')) return `${indent}/** ${lines[0]} */\n`;
  return `${indent}/**\n${lines.map((l) => `${indent} * ${l.replace(/\*\//g, '*\\/')}`).join('\n')}\n${indent} */\n`;
}

function refName(ref: string): string {
  const m = /^#\/\$defs\/([A-Za-z0-9_]+)$/.exec(ref);
  if (!m) throw new Error(`unsupported $ref ${ref}`);
  return m[1]!;
}

function constraints(schema: Schema): string[] {
  const notes: string[] = [];
  if (schema.pattern) notes.push(`Pattern: \`${schema.pattern}\``);
  if (schema.format) notes.push(`Format: ${schema.format}`);
  if (schema.minLength !== undefined) notes.push(`Minimum length: ${schema.minLength}`);
  if (schema.minimum !== undefined) notes.push(`Minimum: ${schema.minimum}`);
  if (schema.maximum !== undefined) notes.push(`Maximum: ${schema.maximum}`);
  return notes;
}

/** A type expression for a non-object schema (objects are emitted as interfaces by their $def). */
function typeExpr(schema: Schema, where: string): string {
  if (schema.$ref) return refName(schema.$ref);
  if (schema.enum) {
    return (schema.enum as unknown[]).map((v) => JSON.stringify(v)).join(' | ');
  }
  if (schema.anyOf) {
    const parts = [...new Set((schema.anyOf as Schema[]).map((s, i) => typeExpr(s, `${where}.anyOf[${i}]`)))];
    return parts.join(' | ');
  }
  switch (schema.type) {
    case 'string':
      return 'string';
    case 'integer':
    case 'number':
      return 'number';
    case 'boolean':
      return 'boolean';
    case 'array':
      if (!schema.items) throw new Error(`${where}: array without items`);
      return `${wrap(typeExpr(schema.items as Schema, `${where}.items`))}[]`;
    case 'object':
      if (schema.properties) throw new Error(`${where}: inline object types are not supported; use a $def`);
      return '{ [member: string]: unknown }';
    default:
      throw new Error(`${where}: unsupported type ${JSON.stringify(schema.type)}`);
  }
}

const wrap = (t: string) => (t.includes('|') ? `(${t})` : t);

function checkKeywords(schema: Schema, allowed: string[], where: string): void {
  for (const key of Object.keys(schema)) {
    if (!ANNOTATIONS.has(key) && !allowed.includes(key)) throw new Error(`${where}: unsupported keyword "${key}"`);
  }
}

function emitInterface(name: string, schema: Schema, out: string[]): void {
  checkKeywords(schema, ['type', 'properties', 'required', 'additionalProperties', 'dependentRequired', 'if', 'then'], `$defs.${name}`);
  const required = new Set<string>((schema.required as string[] | undefined) ?? []);
  const notes: string[] = [];
  for (const [field, needs] of Object.entries((schema.dependentRequired ?? {}) as Record<string, string[]>)) {
    notes.push(`When \`${field}\` is set, ${needs.map((n) => `\`${n}\``).join(', ')} is required.`);
  }
  if (schema.if && schema.then) {
    const cond = schema.if.properties as Record<string, Schema>;
    const [field, sub] = Object.entries(cond)[0]!;
    notes.push(`When \`${field}\` is ${JSON.stringify(sub.const)}, ${(schema.then.required as string[]).map((r) => `\`${r}\``).join(', ')} is required (non-empty).`);
  }
  out.push(doc(schema.description, '', notes));
  out.push(`export interface ${name} {\n`);
  for (const [field, raw] of Object.entries((schema.properties ?? {}) as Record<string, Schema>)) {
    checkKeywords(raw, ['type', '$ref', 'enum', 'items', 'anyOf'], `$defs.${name}.${field}`);
    let description = raw.description as string | undefined;
    const extra = constraints(raw);
    if (raw.$ref && description === undefined) description = undefined;
    out.push(doc(description, '  ', extra));
    out.push(`  ${field}${required.has(field) ? '' : '?'}: ${typeExpr(raw, `$defs.${name}.${field}`)};\n`);
  }
  if (schema.additionalProperties === undefined || schema.additionalProperties === true) {
    out.push('  /** Members not listed are accepted unchanged. */\n  [member: string]: unknown;\n');
  } else if (schema.additionalProperties !== false) {
    throw new Error(`$defs.${name}: unsupported additionalProperties`);
  }
  out.push('}\n\n');
}

export function generateEventTypes(schema: Schema = loadSchema()): string {
  const out: string[] = [
    '// GENERATED FILE: do not edit. Generated by scripts/generate-event-types.ts from\n',
    `// ${SCHEMA_SPECIFIER} (${schema.$id}).\n`,
    '// Regenerate: npm run build && npm run generate -w packages/client\n',
    '/* eslint-disable */\n\n',
  ];
  const defs = schema.$defs as Record<string, Schema>;
  for (const [name, def] of Object.entries(defs)) {
    if (def.type === 'object' && (def.properties || name === 'Event')) {
      emitInterface(name, def, out);
      continue;
    }
    checkKeywords(def, ['type', 'enum', 'anyOf'], `$defs.${name}`);
    if (def.enum) {
      const constName = name.replace(/([a-z])([A-Z])/g, '$1_$2').toUpperCase() + 'S';
      out.push(doc(`All values of {@link ${name}}.`, ''));
      out.push(`export const ${constName} = ${JSON.stringify(def.enum)} as const;\n\n`);
    }
    out.push(doc(def.description as string | undefined, '', constraints(def)));
    out.push(`export type ${name} = ${typeExpr(def, `$defs.${name}`)};\n\n`);
  }
  const root = refName(schema.$ref as string);
  out.push(doc(schema.description as string | undefined, ''));
  out.push(`export type EcapiEvent = ${root};\n`);
  return out.join('').replace(/\n+$/, '\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1] && process.argv.includes('--write')) {
  writeFileSync(GENERATED_FILE, generateEventTypes());
  process.stdout.write(`wrote ${GENERATED_FILE}\n`);
}
