// The Temporal client side of this process (hooks, the node upgrade watch's
// async completions, the visibility gauges) behind one object whose connection
// can be replaced: gRPC fixes TLS credentials when it connects, so a rotated CA
// or client certificate needs a new connection. Holders keep `client`; it
// always forwards to the current one.
import { AsyncCompletionClient, Client, Connection } from '@temporalio/client';
import { connectionOptions, type TemporalConnectionSettings, type TemporalCredentials } from './connection.ts';

/**
 * @temporalio/client retries a failed call from a timer that Connection.close() does not clear; when
 * it fires after the close, grpc-js throws this from the timer, outside any await: an uncaught
 * exception that would end the process in the middle of its ordered stop (make dev's management
 * cluster left running) or on a credential reload.
 */
const CLOSED_CHANNEL = 'Channel has been shut down';
let closedChannelGuard = false;

/** From the first close on, that one error is not a crash; any other uncaught error still ends the process as Node would. */
function tolerateRetriesAfterClose(): void {
  if (closedChannelGuard) return;
  closedChannelGuard = true;
  process.on('uncaughtException', (err) => {
    if (err instanceof Error && err.message === CLOSED_CHANNEL) return;
    console.error(err);
    process.exit(1);
  });
}

/** Calls in flight on a replaced connection get this long before it closes. */
const OLD_CONNECTION_GRACE_MS = 60_000;

export class TemporalClients {
  private current: { connection: Connection; client: Client; asyncCompletion: AsyncCompletionClient };
  private readonly retired = new Set<Connection>();
  /** Forwards every property to the current Client (a Proxy, so holders never see the swap). */
  readonly client: Client;

  private readonly settings: TemporalConnectionSettings;

  constructor(settings: TemporalConnectionSettings, credentials: TemporalCredentials) {
    this.settings = settings;
    this.current = this.open(credentials);
    this.client = new Proxy(this.current.client, {
      get: (_target, property) => {
        const c = this.current.client;
        const value: unknown = Reflect.get(c, property, c);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(c) : value;
      },
    });
  }

  get connection(): Connection {
    return this.current.connection;
  }

  get asyncCompletion(): AsyncCompletionClient {
    return this.current.asyncCompletion;
  }

  private open(credentials: TemporalCredentials) {
    // Lazy: the api starts (and answers "retry later") while Temporal is down.
    const connection = Connection.lazy(connectionOptions(this.settings, credentials));
    return {
      connection,
      client: new Client({ connection, namespace: this.settings.namespace }),
      asyncCompletion: new AsyncCompletionClient({ connection, namespace: this.settings.namespace }),
    };
  }

  setApiKey(apiKey: string): void {
    this.current.connection.setApiKey(apiKey);
  }

  /** New TLS material: new calls use a new connection; the old one closes after a grace period. */
  reconnect(credentials: TemporalCredentials): void {
    const old = this.current.connection;
    this.current = this.open(credentials);
    this.retired.add(old);
    setTimeout(() => {
      this.retired.delete(old);
      tolerateRetriesAfterClose();
      void old.close().catch(() => undefined);
    }, OLD_CONNECTION_GRACE_MS).unref();
  }

  async close(): Promise<void> {
    tolerateRetriesAfterClose();
    await Promise.all([this.current.connection, ...this.retired].map((c) => c.close().catch(() => undefined)));
    this.retired.clear();
  }
}
