/**
 * The service's base URL, checked before anything is sent: `https://host[:port][/prefix]`, to
 * which the client adds `/v1/events`. Refused with a message that says what to write instead:
 * - `http://…`: the service answers HTTPS (TLS 1.3) only; a plain request would only meet a closed
 *   connection (and, on retries, look like a network failure), so the https:// form is suggested;
 * - a URL that already ends in `/v1/events`: the client adds it, the request would go to
 *   `/v1/events/v1/events` and get 404;
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

/** Parses and checks a base URL; throws a TypeError naming `name` (`baseUrl`, `--url`) and the fix. */
export function parseBaseUrl(baseUrl: string, name = 'baseUrl'): BaseUrl {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    throw new TypeError(`${name} "${baseUrl}" is not a URL: give ${BASE_URL_SHAPE}`);
  }
  const path = url.pathname.replace(/\/+$/, '');
  if (url.protocol === 'http:') {
    throw new TypeError(`${name} ${baseUrl} is plain http://: ecapi-ingest answers HTTPS (TLS 1.3) only; use https://${url.host}${path}`);
  }
  if (url.protocol !== 'https:') throw new TypeError(`${name} ${baseUrl} is not an https:// URL: give ${BASE_URL_SHAPE}`);
  if (path === EVENTS_PATH || path.endsWith(EVENTS_PATH)) {
    throw new TypeError(`${name} ${baseUrl} ends in ${EVENTS_PATH}, which the client adds itself: use ${url.origin}${path.slice(0, -EVENTS_PATH.length)}`);
  }
  return { origin: url.origin, path: path + EVENTS_PATH, eventsUrl: url.origin + path + EVENTS_PATH };
}
