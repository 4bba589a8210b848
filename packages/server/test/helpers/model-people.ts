/**
 * The people of the lifecycle model tests (test/lifecycle/deletion-model.test.ts,
 * retention-model.test.ts): who an event carries (a subset of one user's identifiers, one
 * identifier of each of two users, or none), as a fast-check arbitrary and as (user, identifier
 * index) pairs, and the typed identifiers of an event's emails and phones; the users' identifiers.
 */
import fc from 'fast-check';
import { sha } from './event-generator.js';

/** Who an event carries: some of user u's identifiers (mask), a link of users u and v, or nobody. */
export type Who =
  | { readonly kind: 'user'; readonly u: number; readonly mask: number }
  | { readonly kind: 'link'; readonly u: number; readonly v: number; readonly mask: number }
  | { readonly kind: 'none' };

export const who: fc.Arbitrary<Who> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('user' as const), u: fc.nat(3), mask: fc.nat(6) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('link' as const), u: fc.nat(3), v: fc.nat(3), mask: fc.nat(6) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('none' as const) }) },
);

/** The (user, identifier index) pairs an event carries; `users[u]`: how many identifiers user u has. */
export function carried(w: Who, users: readonly number[]): [number, number][] {
  const n = users.length;
  if (w.kind === 'none') return [];
  if (w.kind === 'user') {
    const u = w.u % n;
    const c = users[u]!;
    const bits = (w.mask % ((1 << c) - 1)) + 1; // a non-empty subset of the user's identifiers
    return Array.from({ length: c }, (_, j) => j).filter((j) => bits & (1 << j)).map((j) => [u, j]);
  }
  const u = w.u % n;
  const v = w.v % n;
  const pairs: [number, number][] = [[u, w.mask % users[u]!]];
  if (v !== u) pairs.push([v, (w.mask >> 1) % users[v]!]);
  return pairs;
}

/** The typed identifiers of an event's hashed emails and phones, as the view links them. */
export const identifiersOfParts = (emails: readonly string[], phones: readonly string[]): string[] => [
  ...emails.map((e) => `email:${e}`),
  ...phones.map((p) => `phone:${p}`),
];

/**
 * The users of a model test, their identifiers seeded by `name`: identifier j of user u is an email
 * (j even) or a phone (j odd), a SHA-256 hex digest, typed as the view types it (merged-view/identity.ts).
 */
export function modelUsers(name: string) {
  const hashOf = (u: number, j: number) => sha(`${name}-user-${u}-${j}`);
  return {
    hashOf,
    identifierOf: (u: number, j: number) => `${j % 2 === 0 ? 'email' : 'phone'}:${hashOf(u, j)}`,
    /** The hashed emails and phones an event of `w` carries. */
    identifiersCarried(w: Who, users: readonly number[]): { emails: string[]; phones: string[] } {
      const pairs = carried(w, users);
      return {
        emails: pairs.filter(([, j]) => j % 2 === 0).map(([u, j]) => hashOf(u, j)),
        phones: pairs.filter(([, j]) => j % 2 === 1).map(([u, j]) => hashOf(u, j)),
      };
    },
    /** `s` with each user's digest written u<u>.<j> (others shortened): readable traces. */
    short: (s: string) =>
      s.replace(/[0-9a-f]{64}/g, (h) => {
        for (let u = 0; u < 4; u++) for (let j = 0; j < 3; j++) if (hashOf(u, j) === h) return `u${u}.${j}`;
        return `${h.slice(0, 6)}…`;
      }),
  };
}
