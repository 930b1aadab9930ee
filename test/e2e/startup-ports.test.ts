import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, scratchDir, startStandalone } from '../support/processes.js';

// Startup is all or nothing (docs/configuration.md, "Ports"): a standalone that cannot bind one
// of its ports exits non-zero within seconds, naming the flag and the port, after closing what it
// had opened; a port given explicitly is never replaced; only Lite's default metrics port, when
// another installation holds it, gives way to a free one.

let scratch: { dir: string; cleanup: () => void };
let holder: Server;
let taken: number;

/** Holds a TCP port on 127.0.0.1, as a second installation on the host would. */
async function holdPort(port = 0): Promise<Server> {
  const s = createServer();
  await new Promise<void>((res, rej) => {
    s.once('error', rej);
    s.listen(port, '127.0.0.1', () => res());
  });
  return s;
}
const portOf = (s: Server) => (s.address() as { port: number }).port;

/** Whether nothing listens on 127.0.0.1:port any more (we can bind it ourselves). */
async function free(port: number): Promise<boolean> {
  try {
    const s = await holdPort(port);
    await new Promise<void>((r) => s.close(() => r()));
    return true;
  } catch {
    return false;
  }
}

beforeAll(async () => {
  scratch = scratchDir('leoflow-startup-ports-');
  holder = await holdPort();
  taken = portOf(holder);
});

afterAll(async () => {
  await new Promise<void>((r) => holder.close(() => r()));
  scratch.cleanup();
});

describe('a standalone that cannot bind a port', () => {
  // Every other port is given explicitly and free, so the test can check each was released.
  const cases = [
    { flag: '--http-port', extra: [] as string[] },
    { flag: '--agent-port', extra: [] },
    { flag: '--metrics-port', extra: [] },
    { flag: '--door-port', extra: [] },
    // a cell endpoint serves the door of this process (--door-port stays given)
    { flag: '--cell-port', extra: [] },
  ];
  for (const c of cases) {
    it(`exits non-zero naming ${c.flag} and the port, leaving no port bound`, async () => {
      const others = await Promise.all([holdPort(), holdPort(), holdPort(), holdPort()]);
      const ports = others.map(portOf);
      await Promise.all(others.map((s) => new Promise<void>((r) => s.close(() => r()))));
      const flags = ['--http-port', '--agent-port', '--metrics-port', '--door-port'].filter(
        (f) => f !== c.flag,
      );
      const dataDir = join(scratch.dir, c.flag.slice(2));
      const args = [
        'standalone',
        '--data-dir',
        dataDir,
        ...flags.flatMap((f, i) => [f, String(ports[i])]),
        c.flag,
        String(taken),
        ...c.extra,
      ];
      const started = Date.now();
      const r = await cli(args, { LEOFLOW_LOG_LEVEL: 'error' }, 30_000);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('LF_PORT_UNAVAILABLE');
      expect(r.stderr).toContain(
        `${c.flag} ${taken} is in use: pass another port, or 0 for a free one`,
      );
      expect(Date.now() - started).toBeLessThan(20_000);
      for (const p of ports) expect(await free(p)).toBe(true);
    });
  }
});

describe('the metrics port', () => {
  it('given explicitly and taken: refused, never replaced', async () => {
    const r = await cli(
      [
        'standalone',
        '--data-dir',
        join(scratch.dir, 'explicit'),
        '--http-port',
        '0',
        '--agent-port',
        '0',
        '--metrics-port',
        String(taken),
      ],
      { LEOFLOW_LOG_LEVEL: 'error' },
      30_000,
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`--metrics-port ${taken} is in use`);
  });

  it("Lite's default taken by another installation: a free port, printed", async () => {
    // The default is 9464; hold it (or find it held already by something else on this host).
    const held = await holdPort(9464).catch(() => null);
    try {
      const lite = await startStandalone({
        dataDir: join(scratch.dir, 'default-taken'),
        omitMetricsPort: true,
      });
      try {
        expect(lite.metricsUrl).not.toBeNull();
        expect(lite.metricsUrl).not.toContain(':9464/');
        expect(lite.output()).toContain('the default metrics port 9464 is in use');
      } finally {
        await lite.stop();
      }
    } finally {
      if (held) await new Promise<void>((r) => held.close(() => r()));
    }
  });
});

describe('a door that cannot bind its port', () => {
  it('exits non-zero naming --port and the port', async () => {
    const dataDir = join(scratch.dir, 'door');
    const started = Date.now();
    const r = await cli(
      [
        'door',
        '--data-dir',
        dataDir,
        '--directory-file',
        join(dataDir, 'directory.db'),
        '--port',
        String(taken),
      ],
      { LEOFLOW_LOG_LEVEL: 'error' },
      30_000,
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`--port ${taken} is in use: pass another port, or 0 for a free one`);
    expect(Date.now() - started).toBeLessThan(20_000);
  });
});
