/**
 * The input of `ecapi-ingest send`: an NDJSON or JSON file, or stdin, parsed into records.
 *
 * Invariants: a line that is not JSON is kept as a record with its line number and error (never
 * dropped, never fatal), so it is counted as rejected from the first progress line to the summary
 * and written to --rejects; records of NDJSON keep their 1-based line numbers, so every later
 * message can point at the line. A UTF-8 byte order mark is ignored.
 */
import { CliError } from './cli-io.js';

/** One input record: a parsed event, or a line that is not JSON. */
export interface InputRecord {
  readonly line: number | null;
  readonly event?: unknown;
  readonly parseError?: string;
  readonly raw?: string;
}

/** Parses NDJSON (one event per line) or JSON (an event, an array of events, or {"events": [...]}). */
export function parseInput(text: string, format: 'ndjson' | 'json' | 'auto'): InputRecord[] {
  const body = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  if (format !== 'ndjson') {
    try {
      const value = JSON.parse(body) as unknown;
      if (Array.isArray(value)) return value.map((event) => ({ line: null, event }));
      if (value && typeof value === 'object' && Array.isArray((value as { events?: unknown }).events) && Object.keys(value).length === 1) {
        return ((value as { events: unknown[] }).events).map((event) => ({ line: null, event }));
      }
      return [{ line: null, event: value }];
    } catch (error) {
      if (format === 'json') throw new CliError(`input is not valid JSON: ${(error as Error).message}`);
    }
  }
  const records: InputRecord[] = [];
  const lines = body.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!.trim();
    if (raw === '') continue;
    try {
      records.push({ line: i + 1, event: JSON.parse(raw) as unknown });
    } catch (error) {
      records.push({ line: i + 1, parseError: `invalid JSON on line ${i + 1}: ${(error as Error).message}`, raw });
    }
  }
  return records;
}

/** The input format a file name implies (.ndjson/.jsonl, .json, or decided by the content). */
export function formatOf(file: string): 'ndjson' | 'json' | 'auto' {
  if (/\.(ndjson|jsonl)$/i.test(file)) return 'ndjson';
  if (/\.json$/i.test(file)) return 'json';
  return 'auto';
}

/** All of stdin, as UTF-8. */
export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
