/**
 * Table-driven tests of the privacy policy through EventProcessor.check(): consent (GPP strings
 * encoded with @iabgpp/cmpapi at test time), IP truncation/drop and the plaintext-email scan.
 * Each case asserts the exact error or the exact accepted event and meta.
 */
import { test } from 'node:test';
import { ALL_TRUE_24, H1, gpp, minimal, purposes, runCase } from '../validation/helpers.js';
import type { Case } from '../validation/helpers.js';

const ud = (user_data: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> => minimal({ user_data, ...extra });
const props = (properties: Record<string, unknown>): Record<string, unknown> => minimal({ properties });
const R = '[redacted-email]';

const NO_OPT_OUT = gpp({ usnat: { SaleOptOut: 2, SharingOptOut: 2, TargetedAdvertisingOptOut: 2 } });
const USNAT_SALE = gpp({ usnat: { SaleOptOutNotice: 1, SaleOptOut: 1, SharingOptOut: 2, TargetedAdvertisingOptOut: 2 } });
const USNAT_ALL = gpp({ usnat: { SaleOptOut: 1, SharingOptOut: 1, TargetedAdvertisingOptOut: 1 } });
const USNAT_GPC = gpp({ usnat: { SaleOptOut: 2, Gpc: true } });
const USCA_SHARING = gpp({ usca: { SaleOptOut: 2, SharingOptOut: 1 } });
const USVA_TARGETED = gpp({ usva: { TargetedAdvertisingOptOut: 1 } });
const USCO_SALE = gpp({ usco: { SaleOptOut: 1 } });
const USTX_TARGETED = gpp({ ustx: { TargetedAdvertisingOptOut: 1 } });
const USPV1_YES = gpp({ uspv1: { Notice: 'Y', OptOutSale: 'Y', LspaCovered: 'N' } });
const USPV1_NO = gpp({ uspv1: { Notice: 'Y', OptOutSale: 'N', LspaCovered: 'N' } });
const TCF_ALL = gpp({ tcfeuv2: { PurposeConsents: ALL_TRUE_24 } });
const TCF_NONE = gpp({ tcfeuv2: { PurposeConsents: purposes() } });
const TCF_NO_4 = gpp({ tcfeuv2: { PurposeConsents: purposes(1, 2, 3, 7) } });
const TCFCA_IMPLIED = gpp({ tcfcav1: { PurposesImpliedConsent: purposes(1, 3, 4) } });
const TCFCA_NONE = gpp({ tcfcav1: { PurposesExpressConsent: purposes(1) } });
const USNAT_SALE_AND_USCA_OK = gpp({ usnat: { SaleOptOut: 1 }, usca: { SaleOptOut: 2, SharingOptOut: 2 } });
const TCF_NONE_AND_USNAT_OK = gpp({ tcfeuv2: { PurposeConsents: purposes() }, usnat: { SaleOptOut: 2 } });

const mo = (sections: number[], signals: string[]) => ({ consent: { decision: 'measurement_only' as const, sections, signals } });

const cases: Case[] = [
  // ---- consent: enforce (default)
  { name: 'usnat without opt-out: unchanged, no meta', event: ud({ gpp_string: NO_OPT_OUT, gpp_sid: [7] }), expect: 'unchanged' },
  { name: 'usnat SaleOptOut=1: measurement only', event: ud({ gpp_string: USNAT_SALE, gpp_sid: [7] }), expect: { event: ud({ gpp_string: USNAT_SALE, gpp_sid: [7], mmt_only: true }), meta: mo([7], ['usnat.SaleOptOut']) } },
  { name: 'usnat all three opt-outs, gpp_sid absent (all sections apply)', event: ud({ gpp_string: USNAT_ALL }), expect: { event: ud({ gpp_string: USNAT_ALL, mmt_only: true }), meta: mo([7], ['usnat.SaleOptOut', 'usnat.SharingOptOut', 'usnat.TargetedAdvertisingOptOut']) } },
  { name: 'usnat Global Privacy Control', event: ud({ gpp_string: USNAT_GPC }), expect: { event: ud({ gpp_string: USNAT_GPC, mmt_only: true }), meta: mo([7], ['usnat.Gpc']) } },
  { name: 'usca SharingOptOut=1', event: ud({ gpp_string: USCA_SHARING, gpp_sid: [8] }), expect: { event: ud({ gpp_string: USCA_SHARING, gpp_sid: [8], mmt_only: true }), meta: mo([8], ['usca.SharingOptOut']) } },
  { name: 'usva TargetedAdvertisingOptOut=1', event: ud({ gpp_string: USVA_TARGETED }), expect: { event: ud({ gpp_string: USVA_TARGETED, mmt_only: true }), meta: mo([9], ['usva.TargetedAdvertisingOptOut']) } },
  { name: 'usco SaleOptOut=1', event: ud({ gpp_string: USCO_SALE }), expect: { event: ud({ gpp_string: USCO_SALE, mmt_only: true }), meta: mo([10], ['usco.SaleOptOut']) } },
  { name: 'ustx TargetedAdvertisingOptOut=1', event: ud({ gpp_string: USTX_TARGETED }), expect: { event: ud({ gpp_string: USTX_TARGETED, mmt_only: true }), meta: mo([16], ['ustx.TargetedAdvertisingOptOut']) } },
  { name: 'uspv1 OptOutSale=Y', event: ud({ gpp_string: USPV1_YES }), expect: { event: ud({ gpp_string: USPV1_YES, mmt_only: true }), meta: mo([6], ['uspv1.OptOutSale']) } },
  { name: 'uspv1 OptOutSale=N: unchanged', event: ud({ gpp_string: USPV1_NO }), expect: 'unchanged' },
  { name: 'tcfeuv2 with every purpose consented: unchanged', event: ud({ gpp_string: TCF_ALL, gpp_sid: [2] }), expect: 'unchanged' },
  { name: 'tcfeuv2 without consent', event: ud({ gpp_string: TCF_NONE, gpp_sid: [2] }), expect: { event: ud({ gpp_string: TCF_NONE, gpp_sid: [2], mmt_only: true }), meta: mo([2], ['tcfeuv2.PurposeConsents[1]', 'tcfeuv2.PurposeConsents[3]', 'tcfeuv2.PurposeConsents[4]']) } },
  { name: 'tcfeuv2 without consent for purpose 4 only', event: ud({ gpp_string: TCF_NO_4 }), expect: { event: ud({ gpp_string: TCF_NO_4, mmt_only: true }), meta: mo([2], ['tcfeuv2.PurposeConsents[4]']) } },
  { name: 'tcfcav1 with implied consent: unchanged', event: ud({ gpp_string: TCFCA_IMPLIED }), expect: 'unchanged' },
  { name: 'tcfcav1 with express consent for purpose 1 only', event: ud({ gpp_string: TCFCA_NONE }), expect: { event: ud({ gpp_string: TCFCA_NONE, mmt_only: true }), meta: mo([5], ['tcfcav1.PurposesExpressConsent[3]', 'tcfcav1.PurposesExpressConsent[4]']) } },
  { name: 'gpp_sid selects the section without opt-out', event: ud({ gpp_string: USNAT_SALE_AND_USCA_OK, gpp_sid: [8] }), expect: 'unchanged' },
  { name: 'gpp_sid selects the section with opt-out', event: ud({ gpp_string: USNAT_SALE_AND_USCA_OK, gpp_sid: [7] }), expect: { event: ud({ gpp_string: USNAT_SALE_AND_USCA_OK, gpp_sid: [7], mmt_only: true }), meta: mo([7], ['usnat.SaleOptOut']) } },
  { name: 'empty gpp_sid means every section applies', event: ud({ gpp_string: USNAT_SALE_AND_USCA_OK, gpp_sid: [] }), expect: { event: ud({ gpp_string: USNAT_SALE_AND_USCA_OK, gpp_sid: [], mmt_only: true }), meta: mo([7], ['usnat.SaleOptOut']) } },
  { name: 'two sections, only the TCF one opts out', event: ud({ gpp_string: TCF_NONE_AND_USNAT_OK }), expect: { event: ud({ gpp_string: TCF_NONE_AND_USNAT_OK, mmt_only: true }), meta: mo([2], ['tcfeuv2.PurposeConsents[1]', 'tcfeuv2.PurposeConsents[3]', 'tcfeuv2.PurposeConsents[4]']) } },
  { name: 'mmt_only false is overridden to true', event: ud({ mmt_only: false, gpp_string: USNAT_SALE }), expect: { event: ud({ mmt_only: true, gpp_string: USNAT_SALE }), meta: mo([7], ['usnat.SaleOptOut']) } },
  { name: 'mmt_only already true: decision still recorded', event: ud({ mmt_only: true, gpp_string: USNAT_SALE }), expect: { event: ud({ mmt_only: true, gpp_string: USNAT_SALE }), meta: mo([7], ['usnat.SaleOptOut']) } },

  // ---- consent: reject / off
  { name: 'consent reject: usnat sale opt-out rejected', policy: { consent: 'reject' }, event: ud({ gpp_string: USNAT_SALE }), expect: 'invalid field user_data.gpp_string: consent signals opt-out of sale (usnat.SaleOptOut); this data set rejects such events' },
  { name: 'consent reject: several categories', policy: { consent: 'reject' }, event: ud({ gpp_string: USNAT_ALL }), expect: 'invalid field user_data.gpp_string: consent signals opt-out of sale, sharing and targeted advertising (usnat.SaleOptOut, usnat.SharingOptOut, usnat.TargetedAdvertisingOptOut); this data set rejects such events' },
  { name: 'consent reject: TCF without consent', policy: { consent: 'reject' }, event: ud({ gpp_string: TCF_NONE }), expect: 'invalid field user_data.gpp_string: consent signals opt-out of device storage and access and personalised advertising (tcfeuv2.PurposeConsents[1], tcfeuv2.PurposeConsents[3], tcfeuv2.PurposeConsents[4]); this data set rejects such events' },
  { name: 'consent reject: no opt-out is accepted', policy: { consent: 'reject' }, event: ud({ gpp_string: NO_OPT_OUT }), expect: 'unchanged' },
  { name: 'consent off: opt-out ignored', policy: { consent: 'off' }, event: ud({ gpp_string: USNAT_ALL }), expect: 'unchanged' },
  { name: 'consent off: an undecodable string is still invalid', policy: { consent: 'off' }, event: ud({ gpp_string: 'DBABLA~zz' }), expect: 'invalid field user_data.gpp_string: cannot be decoded as a GPP string (check the header and every section)' },

  // ---- IP
  { name: 'ip keep', event: ud({ event_ip_address: '203.0.113.77', landing_ip_address: '2001:db8:85a3:8d3:1319:8a2e:370:7348' }), expect: 'unchanged' },
  { name: 'ip truncate IPv4 to /24 and IPv6 to /48', policy: { ip: 'truncate' }, event: ud({ event_ip_address: '203.0.113.77', landing_ip_address: '2001:db8:85a3:8d3:1319:8a2e:370:7348' }), expect: { event: ud({ event_ip_address: '203.0.113.0', landing_ip_address: '2001:db8:85a3::' }), meta: { ip: 'truncated' } } },
  { name: 'ip truncate IPv4-mapped IPv6 keeps the IPv4 /24', policy: { ip: 'truncate' }, event: ud({ event_ip_address: '::ffff:198.51.100.23' }), expect: { event: ud({ event_ip_address: '::ffff:198.51.100.0' }), meta: { ip: 'truncated' } } },
  { name: 'ip truncate: already truncated addresses change nothing (no meta)', policy: { ip: 'truncate' }, event: ud({ event_ip_address: '203.0.113.0', landing_ip_address: '2001:db8:1::' }), expect: 'unchanged' },
  { name: 'ip drop', policy: { ip: 'drop' }, event: ud({ event_ip_address: '203.0.113.77', event_user_agent: 'UA', landing_ip_address: '2001:db8::1' }), expect: { event: ud({ event_user_agent: 'UA' }), meta: { ip: 'dropped' } } },
  { name: 'ip drop without IPs: no meta', policy: { ip: 'drop' }, event: ud({ event_user_agent: 'UA' }), expect: 'unchanged' },
  { name: 'ip policy applies only after validation', policy: { ip: 'drop' }, event: ud({ event_ip_address: 'not-an-ip' }), expect: 'invalid field user_data.event_ip_address: must be a valid IPv4 or IPv6 address' },

  // ---- plaintext email scan: redact (default)
  { name: 'page_url with a URL-encoded email', event: props({ page_url: 'https://shop.example/thanks?email=jane.doe%40example.com&x=1' }), expect: { event: props({ page_url: `https://shop.example/thanks?email=${R}&x=1` }), meta: { piiRedacted: ['properties.page_url'] } } },
  { name: 'referrer with a plain email', event: props({ referrer: 'https://mail.example/?to=jane@example.com' }), expect: { event: props({ referrer: `https://mail.example/?to=${R}` }), meta: { piiRedacted: ['properties.referrer'] } } },
  { name: 'search_term that is an email', event: props({ search_term: 'Jane.Doe+promo@Example.CO.UK' }), expect: { event: props({ search_term: R }), meta: { piiRedacted: ['properties.search_term'] } } },
  { name: 'two emails in one value', event: props({ lead_reason: 'a@x.io, b@y.io' }), expect: { event: props({ lead_reason: `${R}, ${R}` }), meta: { piiRedacted: ['properties.lead_reason'] } } },
  { name: 'item name and an unknown property member', event: props({ items: [{ id: 'a', name: 'gift for bob@example.com' }], note: 'x@y.de' }), expect: { event: props({ items: [{ id: 'a', name: `gift for ${R}` }], note: R }), meta: { piiRedacted: ['properties.items[0].name', 'properties.*'] } } },
  { name: 'a property key that is an email is never named in the stored meta', event: props({ 'jane@example.com': 'contact jane@example.com' }), expect: { event: props({ 'jane@example.com': `contact ${R}` }), meta: { piiRedacted: ['properties.*'] } } },
  { name: 'customer_segments entry', event: ud({ customer_segments: ['gold', 'jane@example.com'] }), expect: { event: ud({ customer_segments: ['gold', R] }), meta: { piiRedacted: ['user_data.customer_segments[1]'] } } },
  { name: 'custom_event', event: minimal({ event_type: 'custom', custom_event: 'signup:jane@example.com' }), expect: { event: minimal({ event_type: 'custom', custom_event: `signup:${R}` }), meta: { piiRedacted: ['custom_event'] } } },
  { name: 'nested core ext and uid ext', event: ud({ uids: [{ id: H1, ext: { raw: 'a@b.com' } }] }, { ext: { deep: [{ who: 'c@d.org' }] } }), expect: { event: ud({ uids: [{ id: H1, ext: { raw: R } }] }, { ext: { deep: [{ who: R }] } }), meta: { piiRedacted: ['user_data.uids[0].ext.*', 'ext.*'] } } },
  { name: 'retina image name is not an email', event: props({ page_url: 'https://cdn.example/logo@2x.png' }), expect: 'unchanged' },
  { name: 'a social handle is not an email', event: props({ search_term: '@brand deals' }), expect: 'unchanged' },
  { name: 'user agent is not scanned', event: ud({ event_user_agent: 'bot (admin@example.com)' }), expect: 'unchanged' },
  { name: 'consent, email and ip together in one meta', policy: { ip: 'truncate' }, event: minimal({ user_data: { gpp_string: USNAT_SALE, event_ip_address: '192.0.2.55' }, properties: { referrer: 'x@y.com' } }), expect: { event: minimal({ user_data: { gpp_string: USNAT_SALE, event_ip_address: '192.0.2.0', mmt_only: true }, properties: { referrer: R } }), meta: { ...mo([7], ['usnat.SaleOptOut']), piiRedacted: ['properties.referrer'], ip: 'truncated' } } },

  // ---- plaintext email scan: reject / off
  { name: 'piiScan reject names the first field in document order', policy: { piiScan: 'reject' }, event: props({ referrer: 'ok', page_url: 'https://a.example/?e=j%40x.com', search_term: 'k@y.com' }), expect: 'invalid field properties.page_url: contains a plaintext email address; hash identifiers into user_data instead' },
  { name: 'piiScan reject in customer_segments', policy: { piiScan: 'reject' }, event: ud({ customer_segments: ['jane@example.com'] }), expect: 'invalid field user_data.customer_segments[0]: contains a plaintext email address; hash identifiers into user_data instead' },
  { name: 'piiScan reject: clean event accepted', policy: { piiScan: 'reject' }, event: props({ referrer: 'https://example.com/' }), expect: 'unchanged' },
  { name: 'piiScan off leaves emails', policy: { piiScan: 'off' }, event: props({ referrer: 'jane@example.com' }), expect: 'unchanged' },
];

for (const c of cases) test(c.name, () => runCase(c));
