import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createHarness, FAST_TIMINGS } from '../support/harness.js';
import { access, heartbeat, report, setupVaultAndDag, startAttempt } from './support.js';

type Step =
  | { kind: 'advance'; seconds: number }
  | { kind: 'heartbeat' }
  | { kind: 'succeed' }
  | { kind: 'fail' }
  | { kind: 'clear' }
  | { kind: 'tick' };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant('advance' as const), seconds: fc.integer({ min: 1, max: 900 }) }),
  fc.constant({ kind: 'heartbeat' as const }),
  fc.constant({ kind: 'succeed' as const }),
  fc.constant({ kind: 'fail' as const }),
  fc.constant({ kind: 'clear' as const }),
  fc.constant({ kind: 'tick' as const }),
);

/**
 * Random sequences of transitions and clock advances. After every step, for every token ever
 * handed out: it resolves secrets if and only if its attempt is the live try (queued or
 * running) and it has not expired. Both sides, every time: no false deny, no stale delivery.
 */
describe('credential property: random transitions and clock advances (enforce)', () => {
  it('a token resolves iff its attempt is live and it is unexpired', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 14 }), async (steps) => {
        const h = await createHarness({
          scoping: 'enforce',
          liveness: 'enforce',
          timings: {
            ...FAST_TIMINGS,
            agentLostThresholdMs: 3600_000,
            dispatchLostThresholdMs: 3600_000,
          },
        });
        try {
          await setupVaultAndDag(h, { retries: 3 });
          let launch = await startAttempt(h);
          const run = (await h.store.listRuns('default', {}, { limit: 1, offset: 0 }))[0]!;
          const tokens: string[] = [launch.token];
          let current = launch.token;
          for (const s of steps) {
            switch (s.kind) {
              case 'advance':
                h.clock.advance(s.seconds * 1000);
                break;
              case 'heartbeat': {
                const hb = await heartbeat(h, current);
                if (hb?.renewedToken) {
                  current = hb.renewedToken;
                  tokens.push(current);
                }
                break;
              }
              case 'succeed':
              case 'fail':
                // An expired credential cannot report (Unauthenticated); the agent-lost reaper
                // would handle that attempt. Anything else must not throw.
                await report(h, current, s.kind === 'succeed' ? 'success' : 'failed').catch(
                  (err: unknown) => {
                    if (!String(err).includes('unauthenticated')) throw err;
                  },
                );
                break;
              case 'clear':
                await h.scheduler.tick();
                await h.runs
                  .clear('default', 'cred', run.run_id, { taskIds: null, downstream: true })
                  .catch(() => undefined);
                break;
              case 'tick':
                await h.scheduler.tick();
                break;
            }
            // A newly dispatched attempt registers like a real agent would.
            await h.scheduler.tick();
            for (const l of h.executor.take()) {
              await h.agent(l.token).register({ agentVersion: 't', hostname: 'h', pid: 1 });
              launch = { ...l, session: '' };
              current = l.token;
              tokens.push(l.token);
            }
            const ti = await h.store.getTaskInstance(run.id, 't');
            const now = h.clock.now();
            for (const t of tokens) {
              const claims = await h.tokens.verify(t, now).catch(() => undefined);
              const live =
                claims !== undefined &&
                ti !== undefined &&
                ti.try_number === claims.try_number &&
                (ti.state === 'queued' || ti.state === 'running');
              expect(await access(h, t)).toBe(
                live ? 'delivered' : claims ? 'denied' : 'unauthenticated',
              );
            }
          }
        } finally {
          await h.close();
        }
      }),
      { numRuns: 40 },
    );
  }, 120_000);
});
