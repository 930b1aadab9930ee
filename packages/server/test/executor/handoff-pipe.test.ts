import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create, fromBinary } from '@bufbuild/protobuf';
import { RegisterResponseSchema, type RegisterResponse } from '@leoflow/protocol';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { HandOffRegistration } from '../../src/attempts/attempt-launch.js';
import {
  handOffRegistrationPayload,
  MAX_PIPED_REGISTRATION_BYTES,
} from '../../src/executor/subprocess-executor.js';
import type { RegisteringAgent } from '../../src/attempts/attempt-registration.js';
import { pipeDumpExecutor, pipeDumpLaunch } from './pipe-dump.js';

/**
 * What the subprocess executor writes on a standby agent's pipe when the attempt offers a
 * hand-off registration: Register's answer and the session key it bound, beside the token. Only
 * a standby agent (already running, its pid known) is registered for; a cold agent registers
 * itself, and so does a standby whose registration could not be made.
 */
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'leoflow-handoff-pipe-'));
  dirs.push(d);
  return d;
}

/** A hand-off that records what it was asked and answers `answer` (or fails). */
function recordingHandOff(answer: RegisterResponse | Error) {
  const asked: { token: string; agent: RegisteringAgent }[] = [];
  const handOff: HandOffRegistration = {
    register(token, agent) {
      asked.push({ token, agent });
      return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer);
    },
  };
  return { handOff, asked };
}

const LIVE = create(RegisterResponseSchema, {
  sessionId: 'ti-handoff',
  heartbeatIntervalSeconds: 15,
  prefetch: { variables: { variables: { REGION: 'eu-west' } } },
});

describe('the hand-off registration on the standby pipe', () => {
  it('registers for the standby agent’s own pid and pipes the answer with the session key it bound', async () => {
    const dir = tempDir();
    const { executor, exited, messages } = pipeDumpExecutor(dir, { standbyAgents: 1 });
    const { handOff, asked } = recordingHandOff(LIVE);
    try {
      const started = await executor.start(pipeDumpLaunch('ti-handoff', { handOff }));
      await exited;
      // the assignment first (the agent then holds the token and the key whatever happens
      // next), the registration second
      const [assignment, registration, ...more] = messages();
      expect(more).toEqual([]);
      expect(asked).toHaveLength(1);
      expect(asked[0]!.token).toBe('tok.for.ti-handoff');
      expect(asked[0]!.agent.pid).toBe(started.pid);
      expect(asked[0]!.agent.sessionKey).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(assignment).toMatchObject({
        token: 'tok.for.ti-handoff',
        registration: 'follows',
        session_key: asked[0]!.agent.sessionKey,
      });
      expect(assignment!.registered).toBeUndefined();
      const answer = fromBinary(
        RegisterResponseSchema,
        Buffer.from(registration!.registered!, 'base64'),
      );
      expect(answer.prefetch?.variables?.variables).toEqual({ REGION: 'eu-west' });
    } finally {
      await executor.close();
    }
  });

  it('each attempt gets a session key of its own', async () => {
    const dir = tempDir();
    // two standby agents, so both attempts are handed to one
    const first = pipeDumpExecutor(dir, { standbyAgents: 2 });
    const { handOff, asked } = recordingHandOff(LIVE);
    try {
      await first.executor.start(pipeDumpLaunch('ti-a', { handOff }));
      await first.exited;
      await first.executor.start(pipeDumpLaunch('ti-b', { handOff }));
    } finally {
      await first.executor.close();
    }
    const keys = asked.map((a) => a.agent.sessionKey);
    expect(keys).toHaveLength(2);
    expect(new Set(keys).size).toBe(2);
  });

  it('a registration that fails leaves Register to the agent: the second message says so, a warning without the token', async () => {
    const dir = tempDir();
    const lines: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (l: string) => lines.push(l) });
    const { executor, exited, messages } = pipeDumpExecutor(dir, { standbyAgents: 1, logger });
    const { handOff, asked } = recordingHandOff(new Error('database is locked'));
    try {
      await executor.start(pipeDumpLaunch('ti-handoff', { handOff }));
      await exited;
      const [assignment, registration] = messages();
      expect(asked).toHaveLength(1);
      expect(assignment).toMatchObject({ token: 'tok.for.ti-handoff', registration: 'follows' });
      expect(registration).toEqual({ register: 'self' });
      expect(lines.join('')).toContain('LF_HANDOFF_REGISTER_FAILED');
      expect(lines.join('')).not.toContain('tok.for.ti-handoff');
    } finally {
      await executor.close();
    }
  });

  it('a cold agent is never registered for: it registers itself once it has booted', async () => {
    const dir = tempDir();
    const { executor, exited, messages } = pipeDumpExecutor(dir, { standbyAgents: 0 });
    const { handOff, asked } = recordingHandOff(LIVE);
    try {
      await executor.start(pipeDumpLaunch('ti-cold', { handOff }));
      await exited;
      expect(asked).toHaveLength(0);
      const [assignment, ...more] = messages();
      expect(more).toEqual([]);
      expect(assignment!.token).toBe('tok.for.ti-cold');
      expect(assignment!.registration).toBeUndefined();
      expect(assignment!.session_key).toBeUndefined();
    } finally {
      await executor.close();
    }
  });

  it('an answer too large for the pipe goes without its prefetch (the agent then asks each part)', () => {
    const big = create(RegisterResponseSchema, {
      sessionId: 'ti',
      prefetch: {
        variables: { variables: { HUGE: 'x'.repeat(MAX_PIPED_REGISTRATION_BYTES) } },
      },
    });
    const piped = JSON.parse(handOffRegistrationPayload(big)) as Record<string, string>;
    const answer = fromBinary(RegisterResponseSchema, Buffer.from(piped.registered!, 'base64'));
    expect(answer.sessionId).toBe('ti');
    expect(answer.prefetch).toBeUndefined();
    const small = JSON.parse(handOffRegistrationPayload(LIVE)) as Record<string, string>;
    expect(
      fromBinary(RegisterResponseSchema, Buffer.from(small.registered!, 'base64')).prefetch,
    ).toBeDefined();
  });
});
