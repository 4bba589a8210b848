/**
 * Key ids and data set ids travel as header values (X-Service-Key-Id, X-Service-Data-Set). A control
 * character (a newline read from a file) makes undici refuse the request on every attempt, and
 * surrounding whitespace is stripped by HTTP parsers, so the data set header would no longer equal
 * the events' data_set_id. Checked once, up front, by the Client and by the CLI's `send`.
 */
const PRINTABLE_TRIMMED = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/;

/** True for printable ASCII without leading or trailing whitespace. */
export function isPlainHeaderValue(value: string): boolean {
  return PRINTABLE_TRIMMED.test(value);
}
