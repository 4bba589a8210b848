/**
 * docs/reference/errors.md from the error registry: src/errors.ts (RequestErrors, GatewayErrors)
 * and the protocol's EventErrors give every code, status and message; error-causes.ts adds what a
 * sender should do. A message with parameters is shown with `<parameter>` placeholders (or the
 * examples of error-causes.ts).
 */
import { EventErrors } from '@ecapi-ingest/protocol';
import { GatewayErrors, RequestErrors } from '../../src/errors.js';
import { WWW_AUTHENTICATE } from '../../src/http/public-server.js';
import { EVENT_ERROR_CAUSES, GATEWAY_ERROR_CAUSES, REQUEST_ERROR_CAUSES, type ErrorCause } from './error-causes.js';
import { escapeCell } from './cli-reference.js';
import { GENERATED_NOTICE } from './generated-notice.js';

type Template = (...args: string[]) => string;

/** The parameter names of a message template, as `<snake_case>` placeholders. */
function placeholders(template: Template): string[] {
  const params = /^\s*(?:function\s*\w*\s*)?\(([^)]*)\)/.exec(template.toString())?.[1] ?? '';
  return params
    .split(',')
    .map((p) => p.trim().replace(/[=:].*$/, '').trim())
    .filter(Boolean)
    .map((p) => `<${p.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}>`);
}

/** Each distinct message a template gives, with its examples or its placeholders. */
function messagesOf(template: Template, cause: ErrorCause | undefined): string[] {
  const argLists = cause?.examples ?? [placeholders(template)];
  return [...new Set(argLists.map((args) => template(...args)))];
}

function code(text: string): string {
  return text.includes('`') ? `\`\` ${text} \`\`` : `\`${text}\``;
}

function rows(
  registry: Readonly<Record<string, { readonly status: number; readonly message: unknown }>>,
  causes: Readonly<Record<string, ErrorCause>>,
  format: (message: string) => string,
): string[] {
  return Object.entries(registry).map(([name, def]) => {
    const cause = causes[name];
    const messages = messagesOf(def.message as Template, cause).map((m) => code(format(m)));
    return `| ${def.status} | \`${name}\` | ${escapeCell(messages.join(' / '))} | ${escapeCell(cause?.cause ?? '')} |`;
  });
}

export function renderErrorReference(): string {
  const byStatus = (a: string, b: string) => Number(a.split(' | ')[0]!.slice(2)) - Number(b.split(' | ')[0]!.slice(2));
  const requestRows = [
    ...rows(RequestErrors, REQUEST_ERROR_CAUSES, (m) => JSON.stringify({ error: m }).replace('{"error":', '{"error": ')),
    ...rows(GatewayErrors, GATEWAY_ERROR_CAUSES, (m) => JSON.stringify({ message: m }).replace('{"message":', '{"message": ')),
  ].sort(byStatus);
  const lines = [
    GENERATED_NOTICE('the error registry (packages/server/src/errors.ts, packages/protocol/src/event-errors.ts)'),
    '',
    '# Error reference',
    '',
    'Request-level errors answer `{"error": "<message>"}`; per-event errors appear in `errors[]` of a',
    '`207` (some accepted) or a `400` (none accepted, `accepted: 0`) as `{index, event_id, error}`.',
    'Every response carries `X-Request-Id`, which the server\'s log line and the queued records carry too.',
    'An error answered from the request head (before the body is read: the Host, gateway, 429 shedding,',
    'body size by `Content-Length`, body codings, and the 401s that need no body: Bearer, a missing or',
    'malformed header, an unknown or revoked key) ends the exchange: HTTP/1.1 responses then say',
    '`Connection: close`; HTTP/2 closes the stream, the connection stays. The order in which the checks',
    'run: [decisions](../decisions.md). Messages are part of the API: senders may match on them.',
    '',
    '## Success',
    '',
    '| Status | Body | Meaning |',
    '|---|---|---|',
    '| 200 | `{"accepted": N}` | all N events durably queued |',
    '| 207 | `{"accepted", "rejected", "errors": [...]}` | some events rejected; fix and resend only those |',
    '| 400 | `{"accepted": 0, "rejected", "errors": [...]}` | every event failed validation; see `errors` (per-event messages below) |',
    '',
    '## Request-level errors',
    '',
    '| Status | Code | Body | Cause and what to do |',
    '|---|---|---|---|',
    ...requestRows,
    '',
    'The codes are the service\'s internal names (in logs as `error_code`); the wire carries the message.',
    'A `403` is the gateway in front of the endpoint: any path or method other than `POST /v1/events`,',
    'answered with an `x-amzn-ErrorType` header and before credentials are looked at.',
    `Every \`401\` carries the challenge \`WWW-Authenticate: ${WWW_AUTHENTICATE}\`: the scheme and the`,
    'headers a request must carry (HTTP requires a challenge with a 401; clients that show it name what is missing).',
    '',
    '## Per-event errors',
    '',
    'The `error` of an `errors[]` entry. The SDK returns the code with the message (`{code, message}`).',
    '',
    '| Status | Code | `errors[].error` | Cause |',
    '|---|---|---|---|',
    ...rows(EventErrors, EVENT_ERROR_CAUSES, (m) => m),
    '',
    'The status is the one a request takes when every event failed this way. Retrying: the',
    '[sender guide](../guides/sender.md#retrying).',
  ];
  return `${lines.join('\n')}\n`;
}
