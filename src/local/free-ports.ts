// Free loopback ports for servers a harness starts (`make dev`, the test setup, the
// CAPI test tier's managers through `node src/local/free-ports.ts N`). A port found by
// binding port 0 and closing is free now, but the next bind to port 0 anywhere on the
// machine can get it before our server binds it: with several stacks starting at once,
// that killed a Temporal dev server at start. So each port is left in TIME_WAIT (a
// connection whose server side closed first): the kernel skips it when it picks a port
// for a bind to 0, for about a minute, while a server that asks for it by number (with
// SO_REUSEADDR, as Node and Go listeners set) binds it at once. The trick is the
// Temporal CLI's own (its dev server's freeport).
import { connect, createServer, type Server } from 'node:net';

async function listenOnAnyPort(host: string): Promise<Server> {
  return await new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, host, () => resolve(server));
  });
}

/** Leaves `server`'s port in TIME_WAIT: one connection, closed by the server side first. */
async function leaveInTimeWait(server: Server, host: string, port: number): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    server.once('connection', (accepted) => accepted.destroy());
    const client = connect(port, host);
    client.once('error', reject);
    // The server's FIN ends the client (allowHalfOpen is off), which answers with its own.
    client.once('close', () => resolve());
    client.resume();
  });
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/** `count` distinct free ports on `host`, held together while chosen, each left in TIME_WAIT. */
export async function freePorts(count: number, host = '127.0.0.1'): Promise<number[]> {
  const servers: Server[] = [];
  try {
    while (servers.length < count) servers.push(await listenOnAnyPort(host));
    const ports = servers.map((s) => {
      const address = s.address();
      return typeof address === 'object' && address ? address.port : 0;
    });
    await Promise.all(servers.map((s, i) => leaveInTimeWait(s, host, ports[i] ?? 0)));
    return ports;
  } finally {
    for (const s of servers) if (s.listening) s.close();
  }
}

export async function freePort(host = '127.0.0.1'): Promise<number> {
  const [port] = await freePorts(1, host);
  if (!port) throw new Error(`no free port on ${host}`);
  return port;
}

// `node src/local/free-ports.ts N`: N ports on one line, for shell scripts.
if (import.meta.url === `file://${process.argv[1]}`) {
  const count = Number(process.argv[2] ?? 1);
  if (!Number.isInteger(count) || count < 1 || count > 100) {
    console.error('usage: node src/local/free-ports.ts <count 1..100>');
    process.exit(2);
  }
  freePorts(count).then(
    (ports) => console.log(ports.join(' ')),
    (err: unknown) => {
      console.error(String(err));
      process.exit(1);
    },
  );
}
