// A process that closes its Temporal clients while a call to an unreachable frontend waits for
// its next retry (the client's retry timer outlives the close), then stays up past that retry:
// it prints `survived` and exits 0 unless the retry's error ended it.
import { TemporalClients } from '../../src/platform/temporal/clients.ts';
import { parseConfig } from '../../src/config/index.ts';
import { readTemporalCredentials } from '../../src/platform/temporal/connection.ts';

const port = process.argv[2];
const settings = parseConfig({ TEMPORAL_ADDRESS: `127.0.0.1:${port}` }).temporal;
const clients = new TemporalClients(settings, readTemporalCredentials(settings));
const failed = clients.connection.workflowService.getSystemInfo({}).catch(() => undefined);
// Past the first attempt (refused at once), inside the first backoff (100 ms and more).
await new Promise((r) => setTimeout(r, 60));
await clients.close();
await Promise.race([failed, new Promise((r) => setTimeout(r, 3_000))]);
await new Promise((r) => setTimeout(r, 1_000));
console.log('survived');
