/** Content-Type and Accept checks for POST /v1/events: JSON in, JSON out, UTF-8 only. */

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

/** True when the Accept header (absent means anything) admits application/json with q > 0. */
export function acceptsJson(header: string | undefined): boolean {
  if (header === undefined || header.trim() === '') return true;
  for (const range of header.split(',')) {
    const [type, ...params] = range.split(';');
    const mediaRange = type!.trim().toLowerCase();
    if (mediaRange !== 'application/json' && mediaRange !== 'application/*' && mediaRange !== '*/*') continue;
    const q = params.map((p) => p.trim().toLowerCase()).find((p) => p.startsWith('q='));
    if (q === undefined || Number(q.slice(2)) > 0) return true;
  }
  return false;
}

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
