/**
 * The service's base URL, checked before anything is sent: `https://host[:port][/prefix]`, to
 * which the client adds `/v1/events`. Refused with a message that says what to write instead:
 * - `http://…`: the service answers HTTPS (TLS 1.3) only; a plain request would only meet a closed
 *   connection (and, on retries, look like a network failure), so the https:// form is suggested;
 * - a URL that already ends in `/v1/events`: the client adds it, the request would go to
 *   `/v1/events/v1/events` and get 404;
 * - a URL with a user name or password: never sent (requests go to the origin), and messages must
 *   not repeat them, so every message here shows the URL with them replaced by `***`;
 * - anything that is not an https:// URL.
 * The CLI's `send` uses the same check for `--url`/`ECAPI_URL`, with its own option's name.
 */
import { EVENTS_PATH } from './protocol.js';

/** What a base URL must look like, said in every message about one. */
export const BASE_URL_SHAPE = "the service's base URL, like https://ingest.example.com or https://127.0.0.1:8443, without /v1/events";

export interface BaseUrl {
  /** `https://host:port` */
  readonly origin: string;
  /** The path POSTed to: the base URL's path (if any) and `/v1/events`. */
  readonly path: string;
  /** `origin + path`, named in messages about where a request went. */
  readonly eventsUrl: string;
}

/** The URL as messages show it: a user name and password (`https://user:pw@host`) replaced by `***`. */
function redacted(baseUrl: string): string {
  return baseUrl.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/?#]*@/i, '$1***@');
}

/** Parses and checks a base URL; throws a TypeError naming `name` (`baseUrl`, `--url`) and the fix. */
export function parseBaseUrl(baseUrl: string, name = 'baseUrl'): BaseUrl {
  let url: URL;
  const shown = redacted(baseUrl);
  try {
    url = new URL(baseUrl);
  } catch {
    throw new TypeError(`${name} "${shown}" is not a URL: give ${BASE_URL_SHAPE}`);
  }
  const path = url.pathname.replace(/\/+$/, '');
  if (url.protocol === 'http:') {
    throw new TypeError(`${name} ${shown} is plain http://: ecapi-ingest answers HTTPS (TLS 1.3) only; use https://${url.host}${path}`);
  }
  if (url.protocol !== 'https:') throw new TypeError(`${name} ${shown} is not an https:// URL: give ${BASE_URL_SHAPE}`);
  if (url.username !== '' || url.password !== '') {
    // They would never be sent (requests go to the origin, which has none): requests are authenticated by their signature.
    throw new TypeError(`${name} ${shown} carries a user name or password, which is never sent: requests are authenticated by their signature (keyId, secret); use https://${url.host}${path}`);
  }
  if (path === EVENTS_PATH || path.endsWith(EVENTS_PATH)) {
    throw new TypeError(`${name} ${shown} ends in ${EVENTS_PATH}, which the client adds itself: use ${url.origin}${path.slice(0, -EVENTS_PATH.length)}`);
  }
  return { origin: url.origin, path: path + EVENTS_PATH, eventsUrl: url.origin + path + EVENTS_PATH };
}
