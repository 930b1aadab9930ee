import { Code, ConnectError, createClient, createRouterTransport } from '@connectrpc/connect';
import { AgentService } from '@leoflow/protocol';
import { pino } from 'pino';
import { afterEach, expect, it } from 'vitest';
import { SessionBindings } from '../../src/attempts/session-binding.js';
import { createAgentAuthentication } from '../../src/rpc/agent-auth.js';
import { forEachDialect } from '../support/dialects.js';
import { createHarness, type Harness } from '../support/harness.js';
import { codeOf, heartbeat, report, setupVaultAndDag, startAttempt } from './support.js';

/**
 * Issue 34, finding 2: a token works only for the agent that registered it. Every attempt RPC
 * after Register — renewal included, before exp as after — needs the session key bound there; a
 * copy without it (or with its own) is refused and audited, and a copy that races the real agent
 * to Register fails the attempt loudly instead of quietly keeping it. Two-sided throughout: the
 * agent that registered is never refused.
 */
let h: Harness;
afterEach(async () => {
  await h?.close();
});

const CANARY = 'canary-binding-7f3a';

/** setupVaultAndDag, with its declared Variable v1 set to a value no message could contain. */
async function setup(h: Harness) {
  await setupVaultAndDag(h);
  await h.vault.setVariable('default', 'v1', CANARY, { secret: true }, h.clock.now());
}

async function unboundAudits() {
  return h.store.listAudit(
    'default',
    { action: 'credential.unbound_use' },
    { limit: 50, offset: 0 },
  );
}

function refusal(err: unknown): { code: Code; message: string } {
  const e = ConnectError.from(err);
  return { code: e.code, message: e.rawMessage };
}

forEachDialect('a token works only with the session key bound at Register', (dialect) => {
  it('before exp: the registered agent is served on every RPC (renewal included); a copy without its key, or with another, is refused on every one and audited once per RPC and reason', async () => {
    h = await createHarness({ dialect });
    await setup(h);
    const a = await startAttempt(h);
    h.clock.advance(15_000);

    // availability: the agent that registered, live, well before exp
    expect((await h.agent(a.token, a.session).getVariables({})).variables).toEqual({
      v1: CANARY,
    });
    expect(await codeOf(h.agent(a.token, a.session).getConnections({}))).toBe('ok');
    expect(await codeOf(h.agent(a.token, a.session).getTaskSpec({}))).toBe('ok');
    const beat = await heartbeat(h, a.token, a.session);
    expect(beat?.renewedToken).not.toBe('');

    // security: a copy of the same (unexpired, even renewed) token
    for (const token of [a.token, beat!.renewedToken]) {
      for (const key of ['', 'the-copy-s-own-key']) {
        const copy = h.agent(token, key);
        for (const call of [
          () => copy.getVariables({}),
          () => copy.getConnections({}),
          () => copy.getTaskSpec({}),
          () => copy.heartbeat({}),
          () => copy.fetchXCom({ upstreamTaskId: 't', key: 'return_value' }),
          () => copy.pushLogs({ lines: [] }),
          () => copy.pushXCom({ key: 'k', value: new TextEncoder().encode('x') }),
        ]) {
          const r = await call().then(() => 'served', refusal);
          expect(r).toEqual({
            code: Code.Unauthenticated,
            message: expect.stringMatching(
              key === ''
                ? /^LF_CREDENTIAL_UNBOUND: .* this request carried no session key\. /
                : /^LF_CREDENTIAL_UNBOUND: .* this request carried another session key\. /,
            ),
          });
          expect(JSON.stringify(r)).not.toContain(CANARY);
        }
      }
    }
    await expect(report(h, a.token, 'success', '')).rejects.toThrow(/LF_CREDENTIAL_UNBOUND/);
    // nothing the copies did changed the attempt
    expect((await h.store.getTaskInstanceById(a.identity.task_instance_id))?.state).toBe('running');
    const audits = await unboundAudits();
    // once per RPC and reason on this replica, never a key, a token or a value
    expect(
      audits.map((e) => `${String(e.payload.rpc)}:${String(e.payload.reason)}`).sort(),
    ).toEqual([
      'fetchXCom:no_key',
      'fetchXCom:other_key',
      'getConnections:no_key',
      'getConnections:other_key',
      'getTaskSpec:no_key',
      'getTaskSpec:other_key',
      'getVariables:no_key',
      'getVariables:other_key',
      'heartbeat:no_key',
      'heartbeat:other_key',
      'pushLogs:no_key',
      'pushLogs:other_key',
      'pushXCom:no_key',
      'pushXCom:other_key',
      'reportState:no_key',
    ]);
    for (const e of audits) {
      expect(e.actor).toBe(`agent:${a.identity.task_instance_id}#1`);
      const text = JSON.stringify(e);
      for (const secret of [CANARY, a.session, a.token, 'the-copy-s-own-key'])
        expect(text).not.toContain(secret);
    }
    // and the agent itself goes on: its outcome lands
    expect((await report(h, a.token, 'success', a.session)).shouldTerminate).toBe(false);
    expect((await h.store.getTaskInstanceById(a.identity.task_instance_id))?.state).toBe('success');
  });

  it('across replicas: the binding is read from the store, so a replica that never saw the Register serves the agent and refuses a copy', async () => {
    h = await createHarness({ dialect });
    await setup(h);
    const a = await startAttempt(h);
    // another replica: the same store and keys, its own memory (no binding remembered)
    const sessions = new SessionBindings({
      store: h.store,
      clock: h.clock,
      logger: pino({ level: 'silent' }),
    });
    const auth = createAgentAuthentication({ verifier: h.verifier, clock: h.clock, sessions });
    const other = (key: string) =>
      createClient(
        AgentService,
        createRouterTransport((r) => r.service(AgentService, h.agentService), {
          transport: {
            interceptors: [
              (next) => (req) => {
                req.header.set('authorization', `Bearer ${a.token}`);
                if (key !== '') req.header.set('leoflow-session', key);
                return next(req);
              },
            ],
          },
          router: { interceptors: [auth.interceptor] },
        }),
      );
    expect((await other(a.session).getVariables({})).variables).toEqual({ v1: CANARY });
    expect(await codeOf(other('').getVariables({}))).toBe('Unauthenticated');
    expect(await codeOf(other('guess').heartbeat({}))).toBe('Unauthenticated');
    expect(sessions.refusals).toBe(2);
  });

  it('a copy that registers first: the real agent’s Register is refused, the attempt fails with the reason, its credential is revoked and the use audited — the copy keeps nothing', async () => {
    h = await createHarness({ dialect, scoping: 'enforce', liveness: 'enforce' });
    await setup(h); // retries 0: the failure is final
    await h.runs.trigger('default', 'cred', {});
    await h.scheduler.tick();
    const [launch] = h.executor.take();
    const tiId = launch!.identity.task_instance_id;
    // envvar: the token is on the pod spec; someone copies it and races the agent
    const copyReg = await h
      .agent(launch!.token, 'copy-key')
      .register({ agentVersion: 'x', hostname: 'elsewhere', pid: 7, sessionKey: 'copy-key' });
    expect(copyReg.shouldTerminate).toBe(false);
    // the real agent arrives
    const real = await h
      .agent(launch!.token, 'real-key')
      .register({ agentVersion: 't', hostname: 'pod', pid: 1, sessionKey: 'real-key' })
      .then(() => undefined, refusal);
    expect(real).toEqual({
      code: Code.PermissionDenied,
      message: expect.stringMatching(
        /^LF_CREDENTIAL_COPIED: two agent processes registered with the token of try 1 of t, so it was copied; the attempt is failed and its credential revoked/,
      ),
    });
    const row = await h.store.getTaskInstanceById(tiId);
    expect(row?.state).toBe('failed');
    expect(row?.error_message).toBe(real!.message);
    expect(await h.store.getAttemptLiveness(row!.dag_run_id, 't', 1)).toEqual({
      live: false,
      revoked: true,
    });
    const [event] = await unboundAudits();
    expect(event?.payload).toMatchObject({ rpc: 'register', reason: 'second_registration' });
    // the copy: no more secrets, no renewal, told to stop
    const copy = h.agent(launch!.token, 'copy-key');
    expect(await codeOf(copy.getVariables({}))).toBe('PermissionDenied');
    const beat = await copy.heartbeat({});
    expect([beat.shouldTerminate, beat.renewedToken]).toEqual([true, '']);
    // a retry of the real agent's Register is told to stop (nothing more is written)
    const again = await h
      .agent(launch!.token, 'real-key')
      .register({ agentVersion: 't', hostname: 'pod', pid: 1, sessionKey: 'real-key' });
    expect(again.shouldTerminate).toBe(true);
    expect((await h.store.getTaskInstanceById(tiId))?.state).toBe('failed');
  });

  it('the same agent registering again (a retried Register) keeps its attempt', async () => {
    h = await createHarness({ dialect });
    await setup(h);
    const a = await startAttempt(h);
    const again = await h
      .agent(a.token)
      .register({ agentVersion: 't', hostname: 'h', pid: 1, sessionKey: a.session });
    expect(again.shouldTerminate).toBe(false);
    expect((await h.store.getTaskInstanceById(a.identity.task_instance_id))?.state).toBe('running');
    expect(await unboundAudits()).toEqual([]);
  });

  it('Register without any session key is refused before anything is written', async () => {
    h = await createHarness({ dialect });
    await setup(h);
    await h.runs.trigger('default', 'cred', {});
    await h.scheduler.tick();
    const [launch] = h.executor.take();
    const r = await h
      .agent(launch!.token, '')
      .register({ agentVersion: 'old', hostname: 'h', pid: 1 })
      .then(() => undefined, refusal);
    expect(r).toEqual({
      code: Code.FailedPrecondition,
      message: expect.stringMatching(/^LF_AGENT_SESSION_KEY_REQUIRED: /),
    });
    const row = await h.store.getTaskInstanceById(launch!.identity.task_instance_id);
    expect(row?.state).toBe('queued');
    expect(await h.store.getAttemptRecord(row!.id, 1)).toBeUndefined();
  });
});
