// Bounded input, the api half: whatever arrives, the process started as the
// image starts it (NODE_OPTIONS caps V8's old space at 256 MiB) stays up,
// stays under the api container's memory limit and keeps answering CAPI.
// The costliest body the server parses is one at the limit holding as many JSON
// items as it admits (HOOK_SERVER_BODY_MAX_JSON_ITEMS) as `{}`s, the rest one
// string; a body denser than that ([{},{},…]: ~21 heap bytes and ~0.2 µs of one
// event loop per body byte) is refused before it is parsed.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { connect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { HOOKS_API_VERSION, defaultHandlerName, type HookName } from '../../src/api/hooks/contract.ts';
import { parseConfig } from '../../src/config/index.ts';
import { MAX_JSON_DEPTH } from '../../src/config/server.ts';
import { measureJson } from '../../src/domain/json-bounds.ts';
import { hookPath } from '../../src/api/hooks/hook-route.ts';
import { DISCOVERY_PATH } from '../../src/api/hooks/discovery.ts';
import { sampleRequest } from '../../support/capi-fixtures.ts';
import { startExtensionProcess, type ExtensionProcess } from '../support/extension-process.ts';
import { testPki } from '../support/pki.ts';
import { requireEnv } from '../support/services.ts';
import { waitFor } from '../support/wait.ts';

const MiB = 1024 * 1024;
const ca = testPki().ca.certPem;
const discovery = { apiVersion: HOOKS_API_VERSION, kind: 'DiscoveryRequest' };
const pathOf = (hook: HookName) => hookPath(hook, defaultHandlerName(hook));
/** The defaults the process runs with. */
const { bodyLimits, bodyMaxJsonItems } = parseConfig({}).server;
const REQUEST_TIMEOUT_SECONDS = 15;

const unbounded = { maxItems: Number.MAX_SAFE_INTEGER, maxDepth: Number.MAX_SAFE_INTEGER };

/** `envelope` plus a `pad` of `{}`s: exactly `bytes` long, valid JSON, the densest shape there is. */
function denseBody(envelope: object, bytes: number): Buffer {
  const head = `${JSON.stringify(envelope).slice(0, -1)},"pad":[`;
  const tail = ']}';
  const room = bytes - head.length - tail.length;
  const count = Math.max(0, Math.floor((room + 1) / 3));
  const items = count > 0 ? `${'{},'.repeat(count - 1)}{}` : '';
  return Buffer.from(head + items + ' '.repeat(room - items.length) + tail);
}

/**
 * `envelope` plus as many `{}`s as the item bound admits and one string filling it to exactly
 * `bytes`: the costliest body to parse that the server parses.
 */
function costliestBody(envelope: object, bytes: number): Buffer {
  const head = JSON.stringify(envelope).slice(0, -1);
  // `,"pad":[` adds 3 items, `,"fill":` 2, each `{}` 1 and each comma between them 1.
  const count = Math.floor((bodyMaxJsonItems - measureJson(Buffer.from(head), unbounded).items - 5 + 1) / 2);
  const items = `${'{},'.repeat(count - 1)}{}`;
  const start = `${head},"pad":[${items}],"fill":"`;
  return Buffer.from(`${start}${'x'.repeat(bytes - start.length - 2)}"}`);
}

/** A CanUpdateMachine request whose desired Machine spec holds arrays nested `depth` deep. */
function deepBody(depth: number): string {
  const request = sampleRequest('CanUpdateMachine') as { desired: { machine: { spec: Record<string, unknown> } } };
  request.desired.machine.spec.extra = 'NESTED';
  return JSON.stringify(request).replace('"NESTED"', '['.repeat(depth) + ']'.repeat(depth));
}

/** The api Deployment's memory limit (config/manager/api.yaml), in bytes. */
function apiMemoryLimitBytes(): number {
  const yaml = readFileSync(new URL('../../config/manager/api.yaml', import.meta.url), 'utf8');
  const match = /limits:\s*\n\s*memory:\s*(\d+)Mi/.exec(yaml);
  if (!match) throw new Error('config/manager/api.yaml: no memory limit found');
  return Number(match[1]) * MiB;
}

/** Peak resident set size of a process so far (VmHWM), in bytes. */
function peakRss(pid: number): number {
  const match = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!match) throw new Error(`/proc/${pid}/status: no VmHWM`);
  return Number(match[1]) * 1024;
}

/**
 * POSTs `body` (chunked when `chunked`, else with its Content-Length) and resolves with the answer
 * even when the server closes before the whole body is written (as it may after a 413: the
 * client then meets EPIPE, and CAPI's Go client likewise reads the answer it already has).
 */
function post(baseUrl: string, path: string, body: Buffer | string, chunked = false): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers = chunked ? {} : { 'content-length': String(Buffer.byteLength(body)) };
    let answer: Answer | undefined;
    const req = request(new URL(path, baseUrl), { method: 'POST', ca, agent: false, headers }, (res) => {
      const chunks: Buffer[] = [];
      const got: Answer = { statusCode: res.statusCode ?? 0, headers: res.headers, body: {} };
      answer = got;
      const done = () => {
        const text = Buffer.concat(chunks).toString('utf8');
        try {
          got.body = JSON.parse(text) as Record<string, unknown>;
        } catch {
          got.body = { text };
        }
        resolve(got);
      };
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', done);
      res.on('error', done);
    });
    req.on('error', (err) => (answer ? undefined : reject(err)));
    if (!chunked) return void req.end(body);
    const buf = Buffer.from(body);
    for (let at = 0; at < buf.length; at += 64 * 1024) req.write(buf.subarray(at, at + 64 * 1024));
    req.end();
  });
}

interface Answer {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  body: Record<string, unknown>;
}

describe('bounded memory for any request body (api, image NODE_OPTIONS)', () => {
  let proc: ExtensionProcess;
  const send = (path: string, body: Buffer | string, chunked = false) => post(proc.hookUrl, path, body, chunked);
  const alive = async () => {
    const res = await send(DISCOVERY_PATH, JSON.stringify(discovery));
    return { exited: proc.child.exitCode ?? proc.child.signalCode, statusCode: res.statusCode };
  };

  beforeAll(async () => {
    proc = await startExtensionProcess({
      ROLE: 'api',
      // As the image sets them (Dockerfile).
      NODE_OPTIONS: '--max-semi-space-size=4 --max-old-space-size=256',
      MALLOC_ARENA_MAX: '2',
      TEMPORAL_ADDRESS: requireEnv('TEMPORAL_ADDRESS'),
      TEMPORAL_NAMESPACE: requireEnv('TEMPORAL_NAMESPACE'),
      TEMPORAL_TASK_QUEUE: `bounds-${randomUUID()}`,
      // Short, so the slow-client case below sees its reservation come back soon.
      HOOK_SERVER_REQUEST_TIMEOUT: `${REQUEST_TIMEOUT_SECONDS}s`,
    });
    await proc.ready();
  });
  afterAll(() => proc.kill());

  it('refuses three concurrent 10 MiB bodies to discovery with 413 and stays up', async () => {
    const body = denseBody(discovery, 10 * MiB);
    const answers = await Promise.all([1, 2, 3].map(() => send(DISCOVERY_PATH, body)));
    expect(answers.map((a) => a.statusCode)).toEqual([413, 413, 413]);
    expect(answers[0]?.body).toMatchObject({ error: 'PayloadTooLarge' });
    expect(await alive()).toEqual({ exited: null, statusCode: 200 });
  });

  it('stays up and under its memory limit with 20 concurrent bodies at the limit and a burst of normal calls', async () => {
    const big = costliestBody(sampleRequest('CanUpdateMachine'), bodyLimits['in-place']);
    expect(big.length).toBe(bodyLimits['in-place']);
    expect(measureJson(big, unbounded).items).toBeGreaterThan(bodyMaxJsonItems - 2);
    expect(measureJson(big, unbounded).items).toBeLessThanOrEqual(bodyMaxJsonItems);
    const normal: [string, object][] = [
      [DISCOVERY_PATH, discovery],
      [pathOf('GenerateUpgradePlan'), sampleRequest('GenerateUpgradePlan')],
      [pathOf('BeforeClusterCreate'), sampleRequest('BeforeClusterCreate')],
    ];
    // Under a loaded machine a body at the limit may not be read and parsed within the request
    // timeout: the server then closes its connection (the timeout doing its job). Only that is
    // let through, never a reset before the timeout.
    const started = Date.now();
    const bigCalls = Array.from({ length: 20 }, () =>
      send(pathOf('CanUpdateMachine'), big).catch((err: NodeJS.ErrnoException): Answer & { elapsedMs: number } => ({
        statusCode: 0,
        headers: {},
        body: { reset: err.code ?? String(err) },
        elapsedMs: Date.now() - started,
      })),
    );
    const normalCalls = Array.from({ length: 30 }, (_, i) => {
      const [path, body] = normal[i % normal.length] as [string, object];
      return send(path, JSON.stringify(body));
    });
    const [bigAnswers, normalAnswers] = await Promise.all([Promise.all(bigCalls), Promise.all(normalCalls)]);

    expect(normalAnswers.map((a) => a.statusCode)).toEqual(normalAnswers.map(() => 200));
    // A body at the limit is served, or refused for now with what CAPI treats as a call error to retry.
    const served = bigAnswers.filter((a) => a.statusCode === 200);
    const busy = bigAnswers.filter((a) => a.statusCode === 503);
    const timedOut = bigAnswers.filter((a) => a.statusCode === 0);
    for (const a of timedOut) {
      expect(a.body.reset).toMatch(/^(ECONNRESET|EPIPE)$/);
      expect('elapsedMs' in a && a.elapsedMs).toBeGreaterThanOrEqual((REQUEST_TIMEOUT_SECONDS - 1) * 1000);
    }
    expect(bigAnswers.filter((a) => ![200, 503, 0].includes(a.statusCode))).toEqual([]);
    expect(served.length).toBeGreaterThan(0);
    for (const a of busy) {
      expect(a.headers['retry-after']).toBe('1');
      expect(a.body).toEqual({
        error: 'ServiceUnavailable',
        message: 'too many request bodies in flight; retry shortly (HOOK_SERVER_BODY_BYTES_IN_FLIGHT)',
      });
    }
    expect(await alive()).toEqual({ exited: null, statusCode: 200 });
    const pid = proc.child.pid as number;
    console.log(
      `peak RSS ${(peakRss(pid) / MiB).toFixed(0)} MiB (limit ${apiMemoryLimitBytes() / MiB} MiB); ${served.length} of 20 bodies at the limit served, ${busy.length} answered 503, ${timedOut.length} closed at the request timeout`,
    );
    expect(peakRss(pid)).toBeLessThan(apiMemoryLimitBytes());
  });

  it('refuses a body with more JSON items than it parses (413) before parsing it, and stays up', async () => {
    const dense = denseBody(sampleRequest('CanUpdateMachine'), bodyLimits['in-place']);
    const answers = await Promise.all([1, 2, 3].map(() => send(pathOf('CanUpdateMachine'), dense)));
    expect(answers.map((a) => a.statusCode)).toEqual([413, 413, 413]);
    expect(answers[0]?.body).toEqual({
      error: 'PayloadTooLarge',
      message: `request body holds more than ${bodyMaxJsonItems} JSON items (objects, arrays, members, elements) (HOOK_SERVER_BODY_MAX_JSON_ITEMS)`,
    });
    expect(await alive()).toEqual({ exited: null, statusCode: 200 });
  });

  it(`answers a spec nested ${MAX_JSON_DEPTH} deep, refuses one nested deeper (413), and stays up`, async () => {
    const atBound = await send(pathOf('CanUpdateMachine'), deepBody(MAX_JSON_DEPTH - 4));
    expect(atBound.statusCode).toBe(200);
    expect(atBound.body).toMatchObject({ kind: 'CanUpdateMachineResponse', status: 'Success' });
    expect(measureJson(Buffer.from(deepBody(MAX_JSON_DEPTH - 4)), unbounded).depth).toBe(MAX_JSON_DEPTH);
    // Deep enough to overflow the stack of the handler's walk over the spec, were it parsed.
    for (const depth of [MAX_JSON_DEPTH, 5_000]) {
      const answer = await send(pathOf('CanUpdateMachine'), deepBody(depth));
      expect(answer.statusCode).toBe(413);
      expect(answer.body).toEqual({
        error: 'PayloadTooLarge',
        message: `request body nests objects and arrays more than ${MAX_JSON_DEPTH} deep`,
      });
    }
    expect(await alive()).toEqual({ exited: null, statusCode: 200 });
  });

  it('refuses a chunked body with no Content-Length once it passes the limit (413) and stays up', async () => {
    const limit = bodyLimits['in-place'];
    const body = denseBody(sampleRequest('CanUpdateMachine'), limit + 256 * 1024);
    const answer = await send(pathOf('CanUpdateMachine'), body, true);
    expect(answer.statusCode).toBe(413);
    expect(answer.body).toEqual({
      error: 'PayloadTooLarge',
      message: `request body is larger than the limit of ${limit} bytes (HOOK_SERVER_BODY_LIMIT_BYTES)`,
    });
    expect(await alive()).toEqual({ exited: null, statusCode: 200 });
  });

  it('gives a slow client’s body reservation back at the request timeout; normal calls pass meanwhile', async () => {
    const limit = bodyLimits['in-place'];
    // Declares a body at the limit, sends a few bytes of it, then goes quiet (a slowloris).
    const { port } = new URL(proc.hookUrl);
    const slow = connect({ host: '127.0.0.1', port: Number(port), ca });
    let slowAnswer = '';
    slow.on('data', (d: Buffer) => (slowAnswer += d.toString()));
    const slowClosed = new Promise<void>((resolve) => slow.on('close', () => resolve()));
    slow.on('error', () => {});
    await new Promise<void>((resolve) => slow.once('secureConnect', () => resolve()));
    slow.write(
      `POST ${pathOf('CanUpdateMachine')} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ${limit}\r\n\r\n{"apiVersion":`,
    );
    const big = costliestBody(sampleRequest('CanUpdateMachine'), limit);
    // Its reservation leaves no room for another body at the limit: refused for now.
    const refused = await waitFor(
      () => send(pathOf('CanUpdateMachine'), big),
      (a) => a.statusCode === 503,
      REQUEST_TIMEOUT_SECONDS * 1000,
    );
    expect(refused.statusCode).toBe(503);
    // Ordinary calls keep their own room.
    expect(
      (await send(pathOf('BeforeClusterCreate'), JSON.stringify(sampleRequest('BeforeClusterCreate')))).statusCode,
    ).toBe(200);
    // The server ends the slow request (408) and the reservation comes back.
    await slowClosed;
    expect(slowAnswer).toMatch(/^HTTP\/1\.1 408 /);
    const served = await waitFor(
      () => send(pathOf('CanUpdateMachine'), big),
      (a) => a.statusCode === 200,
      10_000,
    );
    expect(served.statusCode).toBe(200);
  });
});
