/**
 * Step 4 of request handling: the data set's privacy policy, applied to an event that passed
 * validation. Order: consent (may reject), plaintext-identifier scan (may reject or redact), IP
 * (truncate or drop). Mutates the event in place (it is owned by the request) and reports what
 * it did in EventPolicyMeta; meta is undefined when the policy changed nothing.
 */
import type { DataSetPolicy } from '../control/data-set-policy.js';
import { EventErrors } from '../errors.js';
import type { EventPolicyMeta, EventRejection } from '../events/event-outcome.js';
import type { GppDecoded } from './gpp.js';
import { evaluateConsent } from './gpp.js';
import { truncateIp } from './ip.js';
import { scanForEmails } from './pii-scan.js';

export const IP_FIELDS = ['event_ip_address', 'landing_ip_address'] as const;

export type PolicyOutcome =
  | { readonly ok: true; readonly meta: EventPolicyMeta | undefined }
  | { readonly ok: false; readonly error: EventRejection };

function joinCategories(categories: readonly string[]): string {
  if (categories.length <= 1) return categories.join('');
  return `${categories.slice(0, -1).join(', ')} and ${categories[categories.length - 1]}`;
}

export function applyPolicy(event: Record<string, unknown>, gpp: GppDecoded | undefined, policy: DataSetPolicy): PolicyOutcome {
  let meta: { -readonly [K in keyof EventPolicyMeta]: EventPolicyMeta[K] } | undefined;
  const userData = event['user_data'] as Record<string, unknown> | undefined;

  // 1. Consent (GPP). gpp is set only when user_data.gpp_string was present and decodable.
  if (gpp !== undefined && policy.consent !== 'off' && userData !== undefined) {
    const outcome = evaluateConsent(gpp, userData['gpp_sid'] as number[] | undefined);
    if (outcome !== undefined) {
      if (policy.consent === 'reject') {
        return {
          ok: false,
          error: EventErrors.INVALID_FIELD.error(
            'user_data.gpp_string',
            `consent signals opt-out of ${joinCategories(outcome.categories)} (${outcome.signals.join(', ')}); this data set rejects such events`,
          ),
        };
      }
      userData['mmt_only'] = true;
      meta = { consent: { decision: 'measurement_only', sections: outcome.sections, signals: outcome.signals } };
    }
  }

  // 2. Plaintext email addresses in free-text, URL and ext fields.
  if (policy.piiScan !== 'off') {
    const result = scanForEmails(event, policy.piiScan);
    if ('rejectedPath' in result) {
      return {
        ok: false,
        error: EventErrors.INVALID_FIELD.error(result.rejectedPath, 'contains a plaintext email address; hash identifiers into user_data instead'),
      };
    }
    if (result.redacted !== undefined) (meta ??= {}).piiRedacted = result.redacted;
  }

  // 3. IP addresses.
  if (policy.ip !== 'keep' && userData !== undefined) {
    let changed = false;
    for (const field of IP_FIELDS) {
      const ip = userData[field];
      if (typeof ip !== 'string') continue;
      if (policy.ip === 'drop') {
        delete userData[field];
        changed = true;
      } else {
        const truncated = truncateIp(ip);
        if (truncated !== ip) {
          userData[field] = truncated;
          changed = true;
        }
      }
    }
    if (changed) (meta ??= {}).ip = policy.ip === 'drop' ? 'dropped' : 'truncated';
  }

  return { ok: true, meta };
}
