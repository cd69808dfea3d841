import { rmSync } from 'node:fs';

export default async function globalTeardown(): Promise<void> {
  const services = globalThis.__capiTestServices;
  if (!services) return;
  await services.temporal?.stop();
  if (!process.env.KEEP_TEST_SERVICES) rmSync(services.dir, { recursive: true, force: true });
}
