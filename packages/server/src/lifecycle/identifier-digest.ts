/**
 * Digests that stand for an identifier (or an event id) in the suppression list and the deletion
 * audit log: HMAC-SHA256 under a random key of the lifecycle store, over the data set and the
 * typed identifier (`email:<hash>`, as merged-view/identity.ts types them). Equal identifiers of one
 * data set give equal digests, so a later event can be matched; the digest is useless without the
 * key, so a dictionary of phone hashes or IP addresses cannot be run against an exported audit log.
 */
import { createHmac } from 'node:crypto';

export function identifierDigest(key: Buffer, dataSetId: string, value: string): string {
  return createHmac('sha256', key).update(dataSetId).update('\u0000').update(value).digest('hex');
}
