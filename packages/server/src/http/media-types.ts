/** Content-Type and Accept checks for POST /v1/events: JSON in, JSON out, UTF-8 only. */
import Negotiator from 'negotiator';

/** True for `application/json` with optional parameters; a charset, if given, must be UTF-8. */
export function isJsonContentType(header: string | undefined): boolean {
  if (header === undefined) return false;
  const [type, ...params] = header.split(';');
  if (type!.trim().toLowerCase() !== 'application/json') return false;
  for (const param of params) {
    const eq = param.indexOf('=');
    if (eq === -1) continue;
    if (param.slice(0, eq).trim().toLowerCase() === 'charset') {
      const charset = param.slice(eq + 1).trim().replace(/^"|"$/g, '').toLowerCase();
      if (charset !== 'utf-8' && charset !== 'utf8') return false;
    }
  }
  return true;
}

/**
 * True when the Accept header admits application/json, by RFC 9110 12.5.1 content negotiation
 * (the `negotiator` library): the most specific media range that matches decides, so
 * `application/json;q=0` excludes JSON even beside a wildcard range that would admit it. An absent
 * or empty header admits anything.
 * Cost: negotiator parses a header in 1-2 us, about ten times the old hand-written check; a sender
 * sends the same Accept value with every request, so answers are kept per header value (a bounded
 * map, cleared when full: a sender cycling values pays the parse, nothing more) and a repeated
 * value costs a map lookup (bench/header-and-ip-parsing.ts).
 */
export function acceptsJson(header: string | undefined): boolean {
  if (header === undefined) return true;
  let admits = acceptAnswers.get(header);
  if (admits === undefined) {
    admits = header.trim() === '' || new Negotiator({ headers: { accept: header } }).mediaType(JSON_TYPES) !== undefined;
    if (acceptAnswers.size >= MAX_ACCEPT_ANSWERS) acceptAnswers.clear();
    acceptAnswers.set(header, admits);
  }
  return admits;
}

/** What the service answers in; `application/json; charset=utf-8` is the same (JSON is UTF-8), and senders ask for it. */
const JSON_TYPES = ['application/json', 'application/json; charset=utf-8'];
const MAX_ACCEPT_ANSWERS = 256;
const acceptAnswers = new Map<string, boolean>();

/**
 * Body encodings: the service reads bodies as sent and never decodes them, so a coding it would not
 * undo is refused instead of being ignored (issue 16): `Content-Encoding` other than `identity`
 * (gzip, br, ...) and `Transfer-Encoding` other than `chunked` alone (`gzip, chunked` passes
 * Node's parser). Returns the registry code of the refusal, or null. The HTTP/1.1 parser already
 * refuses a Transfer-Encoding whose last coding is not chunked; HTTP/2 forbids the header.
 */
export function bodyEncodingRefusal(
  contentEncoding: string | undefined,
  transferEncoding: string | undefined,
): 'UNSUPPORTED_CONTENT_ENCODING' | 'UNSUPPORTED_TRANSFER_ENCODING' | null {
  if (contentEncoding !== undefined) {
    const coding = contentEncoding.trim().toLowerCase();
    if (coding !== '' && coding !== 'identity') return 'UNSUPPORTED_CONTENT_ENCODING';
  }
  if (transferEncoding !== undefined && transferEncoding.trim().toLowerCase() !== 'chunked') return 'UNSUPPORTED_TRANSFER_ENCODING';
  return null;
}
