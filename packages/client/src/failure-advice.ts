/**
 * What the SDK adds to a delivery failure so that its message says what to change, in the SDK's own
 * terms (`baseUrl`, `ca`): the URL a request went to for a wrong URL, a refused connection or an
 * unknown host, and the `ca` option for an untrusted certificate (Node's own hint, "try running
 * Node.js with --use-system-ca", is cut: the fix for a self-signed server is the option).
 *
 * `detail` keeps the failure without the advice (the service's answer or the network error), for
 * callers that give their own advice: the CLI's `send` names its flags (`--url`, `--ca`) instead.
 */
import { BASE_URL_SHAPE } from './base-url.js';
import type { DeliveryFailure } from './send-errors.js';

const NODE_CA_HINT = /;? ?if the root CA is installed locally, try running Node\.js with --use-system-ca/g;

/** A failure with advice appended to its message; `detail` is the message before. */
export function withAdvice(failure: DeliveryFailure, eventsUrl: string): DeliveryFailure {
  const detail = failure.message.replace(NODE_CA_HINT, '');
  let advice: string | undefined;
  switch (failure.code) {
    case 'WRONG_URL':
      advice = `nothing answers POST ${eventsUrl}: baseUrl must be ${BASE_URL_SHAPE}`;
      break;
    case 'CONNECTION_REFUSED':
      advice = `nothing listens at ${eventsUrl} (is the service running, on that port?): check baseUrl, ${BASE_URL_SHAPE}`;
      break;
    case 'HOST_NOT_FOUND':
      advice = `the host of ${eventsUrl} does not resolve: check baseUrl`;
      break;
    case 'TLS':
      advice = `the server's certificate at ${eventsUrl} is not trusted: pass the server's certificate (or its CA) in PEM as the Client's \`ca\` option, e.g. ca: readFileSync('server-cert.pem', 'utf8')`;
      break;
    case 'NETWORK':
    case 'TIMEOUT':
      advice = `POST ${eventsUrl}`;
      break;
    default:
      return failure;
  }
  return { ...failure, message: `${detail}: ${advice}`, detail };
}

/** True when the error (or one it wraps: a cause, an AggregateError's errors) is ECONNREFUSED. */
export function isConnectionRefused(error: unknown, depth = 0): boolean {
  if (depth > 4 || typeof error !== 'object' || error === null) return false;
  const e = error as { code?: unknown; cause?: unknown; errors?: unknown };
  if (e.code === 'ECONNREFUSED') return true;
  if (Array.isArray(e.errors) && e.errors.length > 0 && e.errors.every((x) => isConnectionRefused(x, depth + 1))) return true;
  return isConnectionRefused(e.cause, depth + 1);
}
