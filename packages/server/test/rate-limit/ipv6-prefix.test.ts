/**
 * Pre-auth shedding on the public port counts an IPv6 client by its /64, black-box against the real
 * `serve` process over real TLS 1.3 (audit finding: keyed per /128, a client rotating its source
 * address within its /64 got a fresh burst of failures with each, i.e. unthrottled signature
 * guessing). Loopback has a single IPv6 address, so the client addresses come from PROXY v2 headers
 * of a trusted balancer (`--proxy-protocol`), as on a real deployment behind HAProxy.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import type { Credentials } from '../helpers/https-client.js';
import { v2Header } from '../helpers/proxy-headers.js';
import { postVia, postViaH2 } from '../helpers/proxied-post.js';

let server: ServerProcess;
let creds: Credentials;
const DS = 'v6';

before(async () => {
  const dataDir = tempDataDir();
  creds = await provision(dataDir, [DS]);
  // 3 failures and a client is shed; it then refills one failure per 100 s (never within the test).
  server = await startServer({
    dataDir,
    args: ['--workers', '1', '--no-worker', '--failed-auth-burst', '3', '--failed-auth-rps', '0.01', '--proxy-protocol', '127.0.0.0/8'],
  });
});
after(async () => {
  assert.equal(await server.stop(), 0);
});

/** The client's credentials with a guessed secret: a 401 after the body, an HMAC per guess. */
const guessing = (): Credentials => ({ ...creds, secret: 'guessed-secret' });
/** A request from `client` (the address a PROXY v2 header names), over HTTP/1.1 or HTTP/2. */
const postAs = (client: string, port: number, as: Credentials) => postVia(server, v2Header('inet6', client, port), as, DS);
const postAsH2 = (client: string, port: number, as: Credentials) => postViaH2(server, v2Header('inet6', client, port), as, DS);

test('IPv6 clients rotating their source address within one /64 share one failed-authentication bucket', async () => {
  // A known key id, a wrong secret: 401 after the body (an HMAC computed per guess), from three
  // different addresses of 2001:db8:1:2::/64.
  for (let i = 1; i <= 3; i++) assert.equal(await postAs(`2001:db8:1:2::${i}`, 41000 + i, guessing()), 401, `guess ${i}`);
  // Any further address of that /64 is shed from the head, before a body or an HMAC, over both HTTP versions.
  assert.equal(await postAs('2001:db8:1:2::4', 41004, guessing()), 429);
  assert.equal(await postAs('2001:db8:1:2:ffff:eeee:dddd:cccc', 41005, creds), 429);
  assert.equal(await postAsH2('2001:db8:1:2::5', 41006, creds), 429);
  // Another /64 (next door) is not: it has a bucket of its own.
  assert.equal(await postAs('2001:db8:1:3::1', 41007, creds), 200);
  assert.equal(await postAsH2('2001:db8:1:3::2', 41008, creds), 200);
});
