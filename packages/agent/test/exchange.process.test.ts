/**
 * The agent under the exchange transport: its FIRST call is ExchangeToken, made with the
 * projected token from the file and no bearer; every call after carries the exchanged token,
 * exactly as with envvar. A missing or empty token file is a clear error in the termination log
 * and a non-zero exit, with no call made.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Code, ConnectError } from '@connectrpc/connect';
import { describe, expect, it } from 'vitest';
import { BootstrapCredentialKind, ReportedState } from '@leoflow/protocol';
import { defaultSpec } from './support/fake-agent-service.js';
import { useHarness } from './support/harness.js';

const { tempDir, startFake, start } = useHarness();
const PROJECTED = 'projected.sa.token-value';
const BOOTSTRAP = 'tenant-ns/lf-pod-bootstrap/c2VjcmV0LWtleS1yZWYtZmFsbGJhY2stdmFsdWUtMTIzNA';

describe('agent, exchange transport', () => {
  it('exchanges first, without a bearer, then runs with the exchanged token', async () => {
    const seen: string[] = [];
    const fake = await startFake({
      spec: defaultSpec({ command: 'echo ran' }),
      exchangeToken: (credential) => {
        seen.push(credential);
        return 'exchanged-attempt-token';
      },
    });
    const dir = tempDir();
    const file = path.join(dir, 'token');
    writeFileSync(file, `${PROJECTED}\n`);
    const agent = start({
      url: fake.url,
      token: '',
      workdir: tempDir(),
      env: { LEOFLOW_EXCHANGE_TOKEN_FILE: file, LEOFLOW_TERMINATION_LOG: path.join(dir, 'term') },
    });
    const { code } = await agent.exited;
    expect(code).toBe(0);
    expect(seen).toEqual([PROJECTED]);
    expect(fake.calls[0]).toMatchObject({ method: 'ExchangeToken', authorization: null });
    const rest = fake.calls.slice(1);
    expect(rest.length).toBeGreaterThan(0);
    for (const c of rest) expect(c.authorization).toBe('Bearer exchanged-attempt-token');
    expect(fake.reports[0]?.state).toBe(ReportedState.SUCCESS);
    // the projected token never reaches the agent's diagnostics
    expect(agent.diagnostics()).not.toContain(PROJECTED);
  });

  for (const [label, content] of [
    ['missing', undefined],
    ['empty', ' \n'],
  ] as const) {
    it(`a ${label} token file: termination log, non-zero exit, no call`, async () => {
      const fake = await startFake({ spec: defaultSpec(), exchangeToken: () => 'never' });
      const dir = tempDir();
      const file = path.join(dir, 'token');
      if (content !== undefined) writeFileSync(file, content);
      const term = path.join(dir, 'termination-log');
      const agent = start({
        url: fake.url,
        token: '',
        workdir: tempDir(),
        env: { LEOFLOW_EXCHANGE_TOKEN_FILE: file, LEOFLOW_TERMINATION_LOG: term },
      });
      const { code } = await agent.exited;
      expect(code).toBe(2);
      expect(readFileSync(term, 'utf8')).toMatch(
        label === 'missing'
          ? /projected service-account token .* could not be read \(ENOENT\)/
          : /projected service-account token .* is empty/,
      );
      expect(fake.calls).toEqual([]);
    });
  }

  it('a refused exchange: termination log with the server text, non-zero exit', async () => {
    const fake = await startFake({ spec: defaultSpec() });
    const dir = tempDir();
    const file = path.join(dir, 'token');
    writeFileSync(file, PROJECTED);
    const term = path.join(dir, 'termination-log');
    const agent = start({
      url: fake.url,
      token: '',
      workdir: tempDir(),
      env: { LEOFLOW_EXCHANGE_TOKEN_FILE: file, LEOFLOW_TERMINATION_LOG: term },
    });
    expect((await agent.exited).code).toBe(2);
    expect(readFileSync(term, 'utf8')).toMatch(/token exchange was refused.*exchange not wired/);
    expect(fake.calls.map((c) => c.method)).toEqual(['ExchangeToken']);
  });

  it('an exchange the control plane could not decide (Unavailable) is asked again; a refusal is not', async () => {
    let answers = 0;
    const fake = await startFake({
      spec: defaultSpec({ command: 'echo ran' }),
      exchangeToken: () => {
        answers += 1;
        if (answers === 1) {
          throw new ConnectError(
            'the control plane could not verify the credential now; retry',
            Code.Unavailable,
          );
        }
        return 'exchanged-attempt-token';
      },
    });
    const dir = tempDir();
    const file = path.join(dir, 'token');
    writeFileSync(file, PROJECTED);
    const agent = start({
      url: fake.url,
      token: '',
      workdir: tempDir(),
      env: { LEOFLOW_EXCHANGE_TOKEN_FILE: file, LEOFLOW_TERMINATION_LOG: path.join(dir, 'term') },
    });
    expect((await agent.exited).code).toBe(0);
    expect(fake.calls.slice(0, 2).map((c) => c.method)).toEqual(['ExchangeToken', 'ExchangeToken']);
    expect(fake.reports[0]?.state).toBe(ReportedState.SUCCESS);
    expect(agent.diagnostics()).toMatch(
      /token exchange answered Unavailable; asking again in \d+ ms/,
    );

    const refusing = await startFake({
      spec: defaultSpec(),
      exchangeToken: () => {
        throw new ConnectError(
          'this pod, or the attempt it names, has already exchanged its bootstrap credential',
          Code.PermissionDenied,
        );
      },
    });
    const term = path.join(dir, 'term-refused');
    const refused = start({
      url: refusing.url,
      token: '',
      workdir: tempDir(),
      env: { LEOFLOW_EXCHANGE_TOKEN_FILE: file, LEOFLOW_TERMINATION_LOG: term },
    });
    expect((await refused.exited).code).toBe(2);
    expect(refusing.calls.map((c) => c.method)).toEqual(['ExchangeToken']);
    expect(readFileSync(term, 'utf8')).toMatch(/already exchanged/);
  });

  it('SecretKeyRef fallback: exchanges LEOFLOW_EXCHANGE_BOOTSTRAP as BOOTSTRAP_SECRET; the task never sees it', async () => {
    const seen: [string, BootstrapCredentialKind][] = [];
    const fake = await startFake({
      spec: defaultSpec({ command: 'env; echo ran' }),
      exchangeToken: (credential, kind) => {
        seen.push([credential, kind]);
        return 'exchanged-attempt-token';
      },
    });
    const agent = start({
      url: fake.url,
      token: '',
      workdir: tempDir(),
      env: { LEOFLOW_EXCHANGE_BOOTSTRAP: BOOTSTRAP },
    });
    expect((await agent.exited).code).toBe(0);
    expect(seen).toEqual([[BOOTSTRAP, BootstrapCredentialKind.BOOTSTRAP_SECRET]]);
    expect(fake.calls[0]).toMatchObject({ method: 'ExchangeToken', authorization: null });
    for (const c of fake.calls.slice(1)) {
      expect(c.authorization).toBe('Bearer exchanged-attempt-token');
    }
    const output = fake.lines().join('\n');
    expect(output).toContain('ran');
    expect(output).toContain('PATH=');
    expect(output).not.toContain('LEOFLOW_EXCHANGE_BOOTSTRAP');
    expect(output).not.toContain(BOOTSTRAP);
    expect(agent.diagnostics()).not.toContain(BOOTSTRAP);
  });

  it('SecretKeyRef fallback: an empty value is a clear error, no call', async () => {
    const fake = await startFake({ spec: defaultSpec(), exchangeToken: () => 'never' });
    const dir = tempDir();
    const term = path.join(dir, 'termination-log');
    const agent = start({
      url: fake.url,
      token: '',
      workdir: tempDir(),
      env: { LEOFLOW_EXCHANGE_BOOTSTRAP: ' ', LEOFLOW_TERMINATION_LOG: term },
    });
    expect((await agent.exited).code).toBe(2);
    expect(readFileSync(term, 'utf8')).toMatch(/LEOFLOW_EXCHANGE_BOOTSTRAP is empty/);
    expect(fake.calls).toEqual([]);
  });
});
