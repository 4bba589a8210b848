/**
 * Shared addresses (issue 29, point 6): how much of a valid signed sender's traffic is served
 * while another client on the same address floods failed authentications. Everything runs on
 * loopback, so sender and attacker share 127.0.0.1, as clients behind one NAT (or behind an L4
 * balancer without the PROXY protocol) do.
 *
 * The real `serve` process (one serving process, default shedding limits: 50 failures/s, burst
 * 500). The sender posts one signed event every 100 ms, each on a new TLS connection (the hard
 * case: a keep-alive connection that passed the HMAC is never shed at all), starting 1 s before
 * the attack. The attacker runs `--attackers` concurrent loops of requests naming an unknown key
 * id (401 from the head, then 429 once shed) as fast as they are answered.
 *
 * Usage: node packages/server/dist/bench/shared-address.js [seconds=10] [attackers=4]
 * Prints one JSON line: the sender's 200s and 429s, the attacker's answers and rate.
 */
import https from 'node:https';
import { provision, startServer, tempDataDir } from '../test/helpers/server-process.js';
import { postSigned, sampleEvent } from '../test/helpers/https-client.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

async function main(): Promise<void> {
  const seconds = Number(process.argv[2] ?? 10);
  const attackers = Number(process.argv[3] ?? 4);
  const dataDir = tempDataDir('ecapi-bench-shared-');
  const creds = await provision(dataDir, ['shared']);
  const server = await startServer({ dataDir, args: ['--workers', '1', '--no-worker'] });
  try {
    const sender = { sent: 0, ok: 0, shed: 0, other: 0 };
    const attack = { sent: 0, unauthorized: 0, shed: 0, other: 0 };
    let attacking = false;
    let stop = false;

    const senderLoop = (async () => {
      const started = Date.now();
      for (let i = 0; !stop; i++) {
        await sleep(started + i * 100 - Date.now());
        if (stop) break;
        const res = await postSigned(server.port, server.ca, creds, 'shared', JSON.stringify(sampleEvent('shared'))).catch(() => null);
        if (!attacking) continue; // warm-up: not counted
        sender.sent++;
        if (res?.status === 200) sender.ok++;
        else if (res?.status === 429) sender.shed++;
        else sender.other++;
      }
    })();

    await sleep(1000);
    attacking = true;
    const agent = new https.Agent({ keepAlive: true, maxSockets: attackers });
    const attackOnce = () =>
      new Promise<number>((resolve) => {
        const req = https.request(
          {
            host: '127.0.0.1', servername: 'localhost', port: server.port, ca: server.ca, agent, method: 'POST', path: '/v1/events',
            headers: { 'content-type': 'application/json', 'x-service-key-id': 'no-such-key', 'x-service-data-set': 'shared', 'x-service-signature': '0'.repeat(64), 'content-length': 2 },
          },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.on('error', () => resolve(0));
        req.end('{}');
      });
    const attackStarted = Date.now();
    const attackLoops = Array.from({ length: attackers }, async () => {
      while (!stop) {
        const status = await attackOnce();
        attack.sent++;
        if (status === 401) attack.unauthorized++;
        else if (status === 429) attack.shed++;
        else attack.other++;
      }
    });
    await sleep(seconds * 1000);
    stop = true;
    await Promise.all([senderLoop, ...attackLoops]);
    const attackSeconds = (Date.now() - attackStarted) / 1000;
    agent.destroy();
    process.stdout.write(`${JSON.stringify({
      seconds, attackers,
      sender: { ...sender, served_percent: Math.round((sender.ok / Math.max(1, sender.sent)) * 1000) / 10 },
      attacker: { ...attack, per_second: Math.round(attack.sent / attackSeconds) },
    })}\n`);
  } finally {
    await server.stop();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
