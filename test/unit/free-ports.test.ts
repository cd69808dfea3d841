// Free ports the harness hands to servers it starts: left in TIME_WAIT, so another
// process's bind to port 0 (a Temporal dev server choosing its internal ports, say)
// does not get one before our server binds it, while our server binds it at once.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { describe, expect, it } from '@jest/globals';
import { freePorts } from '../../src/local/free-ports.ts';

/** Local ports of the IPv4 TCP sockets in TIME_WAIT (state 06 in /proc/net/tcp). */
function timeWaitPorts(): Set<number> {
  const rows = readFileSync('/proc/net/tcp', 'utf8').trim().split('\n').slice(1);
  return new Set(
    rows
      .map((row) => row.trim().split(/\s+/))
      .filter((cols) => cols[3] === '06')
      .map((cols) => parseInt(cols[1]?.split(':')[1] ?? '0', 16)),
  );
}

async function listen(port: number): Promise<Server> {
  return await new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

const close = (server: Server) => new Promise<void>((resolve) => server.close(() => resolve()));

describe('free ports', () => {
  it('are distinct, sit in TIME_WAIT, are skipped by binds to port 0, and bind at once when asked for', async () => {
    const ports = await freePorts(3);
    expect(new Set(ports).size).toBe(3);
    const waiting = timeWaitPorts();
    for (const port of ports) expect(waiting.has(port)).toBe(true);

    // 2,000 binds to port 0, as a neighbour starting beside us makes: none gets one of ours.
    const handedOut = new Set<number>();
    for (let i = 0; i < 2_000; i++) {
      const server = await listen(0);
      const address = server.address();
      if (typeof address === 'object' && address) handedOut.add(address.port);
      await close(server);
    }
    expect(ports.filter((p) => handedOut.has(p))).toEqual([]);

    // Our own server gets each port at once.
    const servers = await Promise.all(ports.map((p) => listen(p)));
    await Promise.all(servers.map(close));
  });

  it('prints N ports for shell scripts (scripts/capi.sh) and refuses a bad count', () => {
    const out = execFileSync(process.execPath, ['src/local/free-ports.ts', '4'], { encoding: 'utf8' });
    const ports = out.trim().split(' ').map(Number);
    expect(ports).toHaveLength(4);
    expect(ports.every((p) => Number.isInteger(p) && p > 0 && p < 65536)).toBe(true);
    expect(() => execFileSync(process.execPath, ['src/local/free-ports.ts', '0'], { stdio: 'pipe' })).toThrow(
      /usage: node src\/local\/free-ports.ts <count 1..100>/,
    );
  });
});
