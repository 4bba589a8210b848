/**
 * What stands between the admin port and a request, before any route (issue 16, points 3 and 4):
 *
 * 1. **Host check (DNS rebinding).** A web page on `attacker.example` can make its name resolve to
 *    127.0.0.1 and then read the loopback admin port from the victim's browser: same origin in the
 *    browser's eyes, and without a token nothing else stops it. Such requests carry the attacker's
 *    name in `Host`. Accepted are: an IP literal (a page can only have an IP origin if it was served
 *    by this very port, so an IP cannot be rebound), `localhost`, the configured `--admin-host`
 *    when it is a name, and the operator's `--admin-allowed-hosts` (names, optionally `name:port`,
 *    for a proxy or a DNS name in front of the port). Anything else, a missing `Host` included, gets
 *    `421 Misdirected Request` before routing, for every path.
 *
 * 2. **Token strength.** The admin token guards secrets-adjacent data (key ids, grants, event
 *    statistics) and is the only thing between a network and the port when it is exposed. It must
 *    have at least 32 characters (128 bits when random hex; `openssl rand -hex 32` gives 64) and
 *    not be one character repeated. Enforced whenever a token is set, loopback or not: a weak token
 *    is never better than a strong one, and a uniform rule has no exposure to get wrong.
 *
 * 3. **Failed-authentication throttle.** A wrong token (Bearer header, or the console's login) spends
 *    a per-client bucket (rate-limit/failed-auth-shedder.ts): 10 failures at once, then one per 6 s.
 *    While the bucket is empty every request from that client is answered 429 with Retry-After,
 *    BEFORE its token is compared, so a throttled guesser learns nothing. At 10 guesses a minute per
 *    address a 128-bit token is out of reach. Clients are keyed by IPv4 address or IPv6 /64 (one
 *    host usually owns a whole /64). The state is bounded: at most 10,000 tracked clients; beyond
 *    that, untracked clients share one overflow bucket, so spraying addresses cannot switch the
 *    throttle off. Requests without credentials, and wrong or expired session cookies (32 random
 *    bytes, not guessable), are not counted: a console tab left open must not lock its operator out.
 *
 *    Shared addresses (issue 29, point 6): an operator behind the same NAT or proxy as a guesser
 *    must still get in, without giving the guesser more guesses. So the throttle yields only to
 *    proof that the guesser cannot produce: a valid console session cookie is honoured before the
 *    throttle is looked at (it was issued for the correct token), and a client key from which the
 *    correct token was presented within the last 10 minutes keeps having its tokens compared while
 *    throttled (the correct one is served, a wrong one is answered 429 like any throttled request and
 *    counted). A client key that never presented the correct token stays at 10 guesses a minute, so
 *    online guessing is bounded exactly as before for everyone who does not share an address with
 *    a recent, successful operator. The verified keys are written only after a correct token, and
 *    at most 1,000 are kept (oldest forgotten first).
 *
 * Token comparison is constant-time: both sides are hashed to SHA-256 and compared with
 * timingSafeEqual, so neither length nor content leaks through timing.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import { FailedAuthShedder, type FailedAuthLimits } from '../rate-limit/failed-auth-shedder.js';
import { clientKeyOf } from '../rate-limit/client-key.js';
import type { FastifyReply, FastifyRequest } from 'fastify';

export const MIN_ADMIN_TOKEN_LENGTH = 32;
const MIN_DISTINCT_CHARACTERS = 8;

/** Why a token is too weak (never echoing it), or undefined when it is acceptable. */
export function adminTokenWeakness(token: string): string | undefined {
  if (token.length < MIN_ADMIN_TOKEN_LENGTH) {
    return `it has ${token.length} character${token.length === 1 ? '' : 's'}, at least ${MIN_ADMIN_TOKEN_LENGTH} are required`;
  }
  if (new Set(token).size < MIN_DISTINCT_CHARACTERS) return `it has fewer than ${MIN_DISTINCT_CHARACTERS} distinct characters`;
  return undefined;
}

const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();

/** Constant-time token comparison (both sides hashed: equal lengths whatever was sent). */
export function tokenMatches(sent: string, expected: string): boolean {
  return timingSafeEqual(digest(sent), digest(expected));
}

// ---------------------------------------------------------------------------------------------
// Host header

/** `name`, `name:port`, `[v6]`, `[v6]:port` → lowercased name without brackets and trailing dot, and the port. */
export function parseHostHeader(value: string): { name: string; port: string | null } | null {
  const text = value.trim().toLowerCase();
  if (text === '') return null;
  let name: string;
  let port: string | null = null;
  if (text.startsWith('[')) {
    const end = text.indexOf(']');
    if (end < 0) return null;
    name = text.slice(1, end);
    const rest = text.slice(end + 1);
    if (rest !== '') {
      if (!/^:\d{1,5}$/.test(rest)) return null;
      port = rest.slice(1);
    }
    if (isIP(name) !== 6) return null;
    return { name, port };
  }
  const colon = text.indexOf(':');
  if (colon >= 0) {
    if (text.indexOf(':', colon + 1) >= 0) return null; // a bare IPv6 address is not a valid Host
    port = text.slice(colon + 1);
    if (!/^\d{1,5}$/.test(port)) return null;
    name = text.slice(0, colon);
  } else {
    name = text;
  }
  if (name.endsWith('.')) name = name.slice(0, -1);
  if (!/^[a-z0-9_.-]+$/.test(name)) return null;
  return { name, port };
}

export class AdminHostCheck {
  readonly #names = new Set<string>(['localhost']);
  /** Allow-list entries with a port: name → ports. */
  readonly #namePorts = new Map<string, Set<string>>();

  constructor(adminHost: string, allowedHosts: readonly string[] = []) {
    // An IP admin host (127.0.0.1, 0.0.0.0, ::) needs no entry: IP literals are always accepted.
    const configured = isIP(adminHost) === 0 ? parseHostHeader(adminHost) : null;
    if (configured) this.#names.add(configured.name);
    for (const entry of allowedHosts) {
      const parsed = parseHostHeader(entry);
      if (!parsed) throw new Error(`invalid --admin-allowed-hosts entry "${entry}": use a host name, optionally with :port`);
      if (parsed.port === null) this.#names.add(parsed.name);
      else {
        let ports = this.#namePorts.get(parsed.name);
        if (!ports) this.#namePorts.set(parsed.name, (ports = new Set()));
        ports.add(parsed.port);
      }
    }
  }

  allows(hostHeader: string | undefined): boolean {
    if (hostHeader === undefined) return false;
    const parsed = parseHostHeader(hostHeader);
    if (!parsed) return false;
    if (isIP(parsed.name) !== 0) return true;
    if (this.#names.has(parsed.name)) return true;
    return parsed.port !== null && (this.#namePorts.get(parsed.name)?.has(parsed.port) ?? false);
  }
}

// ---------------------------------------------------------------------------------------------
// Failed-authentication throttle

export const ADMIN_FAILED_AUTH_LIMITS: FailedAuthLimits = Object.freeze({ perSecond: 1 / 6, burst: 10 });
export const ADMIN_MAX_TRACKED_CLIENTS = 10_000;
/** Shared with the public port's shedding (rate-limit/client-key.ts). */
export { clientKeyOf };

/** How long a client key that presented the correct token keeps having its tokens compared while throttled. */
export const ADMIN_VERIFIED_FOR_MS = 10 * 60_000;
export const ADMIN_MAX_VERIFIED_CLIENTS = 1_000;

export class AdminAuthThrottle {
  readonly #shedder: FailedAuthShedder;
  /** Client keys that presented the correct token, with when they last did (insertion order: oldest first). */
  readonly #verified = new Map<string, number>();
  readonly #now: () => number;

  constructor(limits: FailedAuthLimits = ADMIN_FAILED_AUTH_LIMITS, now: () => number = Date.now, maxClients = ADMIN_MAX_TRACKED_CLIENTS) {
    this.#shedder = new FailedAuthShedder(limits, now, maxClients, { sharedOverflow: true });
    this.#now = now;
  }

  /** 0 when the client may try, else whole seconds to wait (Retry-After). */
  retryAfterSeconds(address: string | undefined): number {
    return this.#shedder.shedSeconds(clientKeyOf(address));
  }

  recordFailure(address: string | undefined): void {
    this.#shedder.recordFailure(clientKeyOf(address));
  }

  /** The correct token came from this client: call only after a successful comparison. */
  recordVerified(address: string | undefined): void {
    const key = clientKeyOf(address);
    this.#verified.delete(key);
    if (this.#verified.size >= ADMIN_MAX_VERIFIED_CLIENTS) this.#verified.delete(this.#verified.keys().next().value as string);
    this.#verified.set(key, this.#now());
  }

  /** Whether this client presented the correct token recently: then its tokens are compared even while throttled. */
  recentlyVerified(address: string | undefined): boolean {
    const at = this.#verified.get(clientKeyOf(address));
    return at !== undefined && this.#now() - at <= ADMIN_VERIFIED_FOR_MS;
  }

  get trackedClients(): number {
    return this.#shedder.trackedAddresses;
  }

  close(): void {
    this.#shedder.close();
  }
}

/** Fastify-side view of the throttle and token, shared with the console's login route. */
export interface AdminAuthGate {
  readonly tokenRequired: boolean;
  /**
   * Answers 429 (and returns true) when the client is throttled, unless it presented the correct
   * token recently and `sent` is that token (a wrong one then counts). Otherwise the token of a
   * throttled client is not looked at.
   */
  refuseIfThrottled(request: FastifyRequest, reply: FastifyReply, sent: string | undefined): Promise<boolean>;
  /** Constant-time comparison; a wrong token counts against the client. */
  checkToken(request: FastifyRequest, sent: string): boolean;
}
