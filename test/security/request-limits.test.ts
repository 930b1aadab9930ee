import { createServer, connect, type Server } from 'node:net';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConnectError, Code } from '@connectrpc/connect';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createApiHarness,
  type ApiHarness,
  type SeededTenant,
} from '../../packages/server/test/support/api-harness.js';
import { createHarness, spec, task } from '../../packages/server/test/support/harness.js';
import { cli, scratchDir, writeDag } from '../support/processes.js';

/** Issue 10 item 7: request limits of the REST API, `dags push` and PushXCom. */

/** The documented depth limit (docs/api.md). */
const MAX_JSON_DEPTH = 64;

/** JSON text nested `depth` deep (objects and arrays alternating), built without recursion. */
const nestedText = (depth: number): string => {
  let open = '';
  let close = '';
  for (let i = 0; i < depth; i++) {
    open += i % 2 ? '[' : '{"a":';
    close = (i % 2 ? ']' : '}') + close;
  }
  return `${open}"leaf"${close}`;
};

describe('JSON nested deeper than the limit is refused with 400, not a 500', () => {
  let h: ApiHarness;
  let seeded: SeededTenant;
  beforeAll(async () => {
    h = await createApiHarness('sqlite');
    seeded = await h.seedTenant('deep');
  });
  afterAll(async () => h?.close());

  /** Sends a raw JSON text (a test cannot JSON.stringify what the server must refuse). */
  async function send(method: 'POST' | 'PUT', url: string, payload: string) {
    const res = await h.app.inject({
      method,
      url,
      headers: {
        authorization: `Bearer ${seeded.adminToken}`,
        'content-type': 'application/json',
      },
      payload,
    });
    return { status: res.statusCode, json: JSON.parse(res.body) as Record<string, unknown> };
  }

  it('a run conf nested 10,000 deep answers 400 LF_JSON_TOO_DEEP', async () => {
    const r = await send(
      'POST',
      `/api/v1/dags/${seeded.dag_id}/runs`,
      `{"conf":${nestedText(10_000)}}`,
    );
    expect(r.status).toBe(400);
    expect(r.json['code']).toBe('LF_JSON_TOO_DEEP');
  });

  it('a Connection extra nested 10,000 deep (Airflow JSON inside the body) answers 400', async () => {
    const inner = `{"conn_type":"generic","extra":${nestedText(10_000)}}`;
    const r = await send('PUT', '/api/v1/connections/deep', JSON.stringify({ json: inner }));
    expect(r.status).toBe(400);
    expect(r.json['code']).toBe('LF_JSON_TOO_DEEP');
  });

  it('a Connection extra nested 10,000 deep as fields answers 400', async () => {
    const r = await send(
      'PUT',
      '/api/v1/connections/deep2',
      `{"connection":{"conn_type":"generic","extra":${nestedText(10_000)}}}`,
    );
    expect(r.status).toBe(400);
    expect(r.json['code']).toBe('LF_JSON_TOO_DEEP');
  });

  it('a run conf just inside the limit is accepted (two-sided)', async () => {
    // conf sits two levels down in the body ({conf: …} and the conf object itself).
    const r = await send(
      'POST',
      `/api/v1/dags/${seeded.dag_id}/runs`,
      `{"run_id":"within_limit","conf":{"x":${nestedText(MAX_JSON_DEPTH - 2)}}}`,
    );
    expect(r.status, JSON.stringify(r.json)).toBe(200);
  });
});

describe('the CLI refuses JSON nested deeper than the server takes', () => {
  it.each([
    { flag: '--conf', args: ['runs', 'trigger', 'some_dag', '--conf'] },
    { flag: '--extra', args: ['connections', 'set', 'c1', '--conn-type', 'generic', '--extra'] },
  ])('$flag nested 10,000 deep exits 2 with the limit, not a stack overflow', async ({ args }) => {
    const r = await cli([
      ...args,
      nestedText(10_000),
      '--url',
      'http://127.0.0.1:9',
      '--token',
      'x',
    ]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('more than 64 deep');
    expect(r.stderr).not.toContain('call stack');
  });
});

describe('the REST server closes a request whose body trickles in', () => {
  let h: ApiHarness;
  let token: string;
  let port: number;
  beforeAll(async () => {
    h = await createApiHarness('sqlite', { timeouts: { requestMs: 600, idleMs: 5_000 } });
    token = await h.tokenFor('trickle', 'admin');
    await h.app.listen({ host: '127.0.0.1', port: 0 });
    const addr = h.app.server.address();
    port = typeof addr === 'object' && addr ? addr.port : 0;
  });
  afterAll(async () => h?.close());

  /** Sends `head`, then one byte of body every `everyMs`; resolves when the server hangs up. */
  function trickle(head: string, everyMs: number): Promise<{ ms: number; reply: string }> {
    return new Promise((resolve, reject) => {
      const started = Date.now();
      const sock = connect(port, '127.0.0.1');
      let reply = '';
      let timer: NodeJS.Timeout | undefined;
      const guard = setTimeout(() => {
        clearInterval(timer);
        sock.destroy();
        reject(new Error(`server kept the request open for 8 s; got: ${reply}`));
      }, 8_000);
      sock.on('connect', () => {
        sock.write(head);
        timer = setInterval(() => {
          if (!sock.destroyed) sock.write('{');
        }, everyMs);
      });
      sock.on('data', (b) => (reply += b.toString()));
      sock.on('error', () => undefined);
      sock.on('close', () => {
        clearInterval(timer);
        clearTimeout(guard);
        resolve({ ms: Date.now() - started, reply });
      });
    });
  }

  it('a body sent one byte at a time is cut off within the request timeout', async () => {
    const head =
      'PUT /api/v1/variables/slow HTTP/1.1\r\nHost: x\r\n' +
      `Authorization: Bearer ${token}\r\nContent-Type: application/json\r\n` +
      'Content-Length: 100000\r\n\r\n';
    const { ms, reply } = await trickle(head, 100);
    // 600 ms request timeout + a check interval of 150 ms; the body would take 10,000 s.
    expect(ms).toBeLessThan(3_000);
    expect(reply === '' || reply.startsWith('HTTP/1.1 408')).toBe(true);
  });

  it('headers sent one byte at a time are cut off too', async () => {
    const { ms } = await new Promise<{ ms: number }>((resolve, reject) => {
      const started = Date.now();
      const sock = connect(port, '127.0.0.1');
      const text = 'GET /api/v1/health HTTP/1.1\r\nX-Slow: ' + 'a'.repeat(1000);
      let i = 0;
      const timer = setInterval(() => {
        if (!sock.destroyed) sock.write(text[i++ % text.length]!);
      }, 100);
      const guard = setTimeout(() => {
        clearInterval(timer);
        sock.destroy();
        reject(new Error('server kept slow headers open for 8 s'));
      }, 8_000);
      sock.on('error', () => undefined);
      sock.on('close', () => {
        clearInterval(timer);
        clearTimeout(guard);
        resolve({ ms: Date.now() - started });
      });
    });
    expect(ms).toBeLessThan(3_000);
  });

  it('an ordinary request still succeeds (two-sided)', async () => {
    const r = await fetch(`http://127.0.0.1:${port}/api/v1/health`);
    expect(r.status).toBe(200);
  });
});

describe('dags push checks sizes before reading or sending', () => {
  let scratch: { dir: string; cleanup: () => void };
  beforeAll(() => {
    scratch = scratchDir('lf-push-size-');
  });
  afterAll(() => scratch?.cleanup());

  it('a 60 MB script is refused by size (exit 2, names the file and the limit) before any upload', async () => {
    const dir = writeDag(
      scratch.dir,
      'huge',
      'dag_id: huge\nschedule: null\ntasks:\n  - task_id: t\n    type: bash\n    script: big.sh\n',
    );
    writeFileSync(join(dir, 'big.sh'), Buffer.alloc(60 * 1024 * 1024, 0x61));
    // Nothing listens here: the old behaviour read the file, then blamed the network.
    const r = await cli(['dags', 'push', dir, '--url', 'http://127.0.0.1:9', '--token', 'x']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('LF_DAG_FILE_TOO_LARGE');
    expect(r.stderr).toContain('"big.sh"');
    expect(r.stderr).toContain('1048576 byte (1 MiB) limit');
    expect(r.stderr).not.toContain('cannot reach');
    // The message names the file relative to the DAG folder, never its absolute path.
    expect(r.stderr).not.toContain(join(dir, 'big.sh'));
  });

  it('a server refusing a body as too large is reported as "refused by the server (413 …)", not as unreachable', async () => {
    const h = await createApiHarness('sqlite');
    try {
      const token = await h.tokenFor('big', 'admin');
      await h.app.listen({ host: '127.0.0.1', port: 0 });
      const addr = h.app.server.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      const file = join(scratch.dir, 'vars.json');
      writeFileSync(file, JSON.stringify({ big: 'x'.repeat(9 * 1024 * 1024) }));
      const r = await cli([
        'variables',
        'import',
        file,
        '--url',
        `http://127.0.0.1:${port}`,
        '--token',
        token,
      ]);
      expect(r.code).toBe(1);
      // The server answers 413 and closes the connection without reading the body; whether the
      // client reads that answer or sees the close while it is still uploading is a race (a
      // loaded machine loses it). Either way it says the server refused, never "unreachable".
      expect(r.stderr).toMatch(
        /refused by the server \(413 LF_BODY_TOO_LARGE\)|closed the connection during POST \/api\/v1\/variables\/import .*a body over its size limit is refused this way/,
      );
      expect(r.stderr).not.toContain('cannot reach');
    } finally {
      await h.close();
    }
  });

  it('an unreachable server is still reported as unreachable (two-sided)', async () => {
    // A port that was just free: nothing listens on it.
    const srv: Server = createServer();
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const addr = srv.address();
    const port = typeof addr === 'object' && addr ? addr.port : 0;
    await new Promise<void>((r) => srv.close(() => r()));
    const dir = join(scratch.dir, 'small');
    mkdirSync(dir);
    writeFileSync(
      join(dir, 'leoflow.yaml'),
      'dag_id: small\nschedule: null\ntasks:\n  - task_id: t\n    type: bash\n    command: echo hi\n',
    );
    const r = await cli(['dags', 'push', dir, '--url', `http://127.0.0.1:${port}`, '--token', 'x']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('cannot reach');
  });
});

describe('PushXCom', () => {
  it('refuses an empty key with InvalidArgument and stores nothing', async () => {
    const h = await createHarness();
    try {
      await h.store.putDagVersion(
        'default',
        spec({ dag_id: 'x', tasks: [task('a')] }),
        'h1',
        h.clock.now(),
      );
      const run = await h.runs.trigger('default', 'x', {});
      await h.scheduler.tick();
      const launch = h.executor.take()[0]!;
      const agent = h.agent(launch.token);
      await agent.register({ agentVersion: 't', hostname: 'h', pid: 1 });
      const err = await agent
        .pushXCom({
          key: '',
          value: new TextEncoder().encode('"v"'),
          contentType: 'application/json',
        })
        .then(
          () => null,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(ConnectError);
      expect((err as ConnectError).code).toBe(Code.InvalidArgument);
      const r = await h.store.getRun('default', 'x', run.run_id);
      const xcoms = await h.store.listXComs(r!.id, 'a');
      expect(xcoms).toEqual([]);
      // Two-sided: a named key is stored.
      const ok = await agent.pushXCom({
        key: 'return_value',
        value: new TextEncoder().encode('"v"'),
      });
      expect(ok.accepted).toBe(true);
    } finally {
      await h.close();
    }
  });
});
