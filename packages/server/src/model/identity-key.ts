/**
 * The form of an identity key: `ik_<queue position of the record that started the identity>`
 * (docs/guides/merged-view.md, "Identity linking"). Written by the identity forest
 * (consumer/identity-forest.ts) and read back as a number by the hot state's link table
 * (merged-view/identifier-link-table.ts), which stores the position rather than the string.
 */

/** Identity key of an identity created by the record at queue position `seq`. */
export const identityKeyFor = (seq: number) => `ik_${seq}`;

/** Queue position of an identity key `ik_<seq>`, or -1 for a key of another form. */
export function identityKeySeq(identityKey: string): number {
  if (!identityKey.startsWith('ik_') || identityKey.length < 4 || identityKey.length > 19) return -1;
  let seq = 0;
  for (let i = 3; i < identityKey.length; i++) {
    const c = identityKey.charCodeAt(i);
    if (c < 48 || c > 57 || (c === 48 && i === 3 && identityKey.length > 4)) return -1;
    seq = seq * 10 + (c - 48);
  }
  return Number.isSafeInteger(seq) ? seq : -1;
}
