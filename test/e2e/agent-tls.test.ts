import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cli,
  scratchDir,
  startStandalone,
  writeDag,
  type Standalone,
} from '../support/processes.js';

let scratch: ReturnType<typeof scratchDir>;
let sa: Standalone;

beforeAll(async () => {
  scratch = scratchDir('leoflow-tls-');
  const cert = join(scratch.dir, 'agent.crt');
  const key = join(scratch.dir, 'agent.key');
  // A throwaway self-signed certificate for 127.0.0.1; it doubles as the CA agents trust.
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-days',
      '1',
      '-keyout',
      key,
      '-out',
      cert,
    ],
    { stdio: 'ignore' },
  );
  writeDag(
    join(scratch.dir, 'dags'),
    'tls_hello',
    'dag_id: tls_hello\ntasks:\n  - task_id: a\n    command: echo over tls\n',
  );
  sa = await startStandalone({
    dataDir: join(scratch.dir, 'data'),
    dagsFolder: join(scratch.dir, 'dags'),
    extraArgs: ['--agent-tls-cert', cert, '--agent-tls-key', key, '--agent-tls-ca', cert],
  });
});

afterAll(async () => {
  await sa?.stop();
  scratch?.cleanup();
});

describe('agent channel over TLS', () => {
  it('announces an https agent URL and runs a task through it', async () => {
    expect(sa.output()).toMatch(
      /agent RPC\s+https:\/\/127\.0\.0\.1:\d+ \(gRPC over HTTP\/2, TLS\)/,
    );
    const res = await cli(['runs', 'trigger', 'tls_hello', '--wait', '-o', 'json'], {
      LEOFLOW_URL: sa.url,
      LEOFLOW_TOKEN: sa.token,
    });
    expect(res.code).toBe(0);
    expect((JSON.parse(res.stdout) as { run: { state: string } }).run.state).toBe('success');
  });
});
