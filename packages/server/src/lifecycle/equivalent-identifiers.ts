/**
 * The spellings under which the merged view may have linked an identifier that the suppression
 * list would match (identifier-digest.ts canonicalIdentifier): what `identities forget
 * --identifier` looks up, so that it deletes every identity the person's identifier reached, not
 * only the one of the spelling it was given.
 *
 * The view links identifiers in their typed form as merged-view/identity.ts normalizes them (email,
 * phone, cid and ifa lowercased; a uid id lowercased only when it is a SHA-256 hex digest), so:
 * - a SHA-256 hex digest is one value in any hashed field: `email:`, `phone:`, `cid:` and `uid:` of
 *   the same 64 lowercase hex digits;
 * - a UUID (a device id: `ifa`, the one identifier field that is not a digest; the others must be
 *   SHA-256 hex) may have been sent hyphenated or not, in braces, as `urn:uuid:…`, in upper or lower
 *   case: each of those spellings, lowercased, as `ifa:`;
 * - anything else is itself alone.
 * A bounded list (at most 7 lookups), each an index probe of the view's link table.
 */
import { canonicalIdentifier } from './identifier-digest.js';

const UUID_HEX = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** `identifier` (`<type>:<value>`, as `identities forget` parsed it) and the other typed spellings equivalent to it, without repeats. */
export function equivalentIdentifiers(identifier: string): string[] {
  const canonical = canonicalIdentifier(identifier);
  const out = new Set<string>([identifier]);
  if (canonical.startsWith('sha256:')) {
    const hex = canonical.slice('sha256:'.length);
    for (const type of ['email', 'phone', 'cid', 'uid']) out.add(`${type}:${hex}`);
  } else if (canonical.startsWith('uuid:')) {
    const hyphenated = canonical.slice('uuid:'.length);
    if (UUID_HEX.test(hyphenated)) {
      const plain = hyphenated.replaceAll('-', '');
      const forms = [hyphenated, plain, `{${hyphenated}}`, `{${plain}}`, `urn:uuid:${hyphenated}`, `urn:uuid:${plain}`];
      for (const form of forms) out.add(`ifa:${form}`);
    }
  }
  return [...out];
}
