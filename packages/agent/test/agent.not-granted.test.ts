import { Code, ConnectError } from '@connectrpc/connect';
import { ERROR_CODE_METADATA, LogStream, ReportedState } from '@leoflow/protocol';
import { describe, expect, it } from 'vitest';
import { defaultSpec } from './support/fake-agent-service.js';
import { useHarness } from './support/harness.js';

const { runAgent } = useHarness();

/**
 * Issue 34: a declared secret the grants no longer give the DAG is refused with
 * LF_SECRET_NOT_GRANTED, and the task must not run without what it declared: the attempt fails
 * with the server's sentence (decided by the code the server sends, never by the message).
 * Any other refusal keeps the old contract: the task runs without that part.
 */
const SENTENCE =
  'LF_SECRET_NOT_GRANTED: dag "d" declares variable(s) v not granted to it; ask an admin to add a pattern matching "d" to the grants (leoflow variables set-grants) or remove them from the declaration';

describe('agent process: a declared secret that is not granted', () => {
  it('refused by GetVariables (code in the metadata): the task does not run; the attempt fails with the sentence', async () => {
    const { fake } = await runAgent({
      spec: defaultSpec({ command: 'echo ran' }),
      getVariables: () => {
        throw new ConnectError(SENTENCE, Code.PermissionDenied, {
          [ERROR_CODE_METADATA]: 'LF_SECRET_NOT_GRANTED',
        });
      },
    });
    expect(fake.lines(LogStream.STDOUT)).toEqual([]);
    expect(fake.reports[0]).toMatchObject({
      state: ReportedState.FAILED,
      errorMessage: SENTENCE,
    });
    expect(fake.lines(LogStream.AGENT)).toContain(SENTENCE);
  });

  it('refused in Register’s prefetch with its code: the same, without another call', async () => {
    const { fake } = await runAgent({
      spec: defaultSpec({ command: 'echo ran' }),
      prefetch: () => ({
        variablesRefused: SENTENCE,
        variablesRefusedCode: 'LF_SECRET_NOT_GRANTED',
        connections: { connectionUris: {} },
      }),
    });
    expect(fake.lines(LogStream.STDOUT)).toEqual([]);
    expect(fake.reports[0]).toMatchObject({ state: ReportedState.FAILED, errorMessage: SENTENCE });
    expect(fake.callsOf('GetVariables')).toHaveLength(0);
  });

  it('the same sentence without the code (any other refusal) still runs the task without the part', async () => {
    const { fake, code } = await runAgent({
      spec: defaultSpec({ command: 'echo ran' }),
      getVariables: () => {
        throw new ConnectError(SENTENCE, Code.PermissionDenied);
      },
    });
    expect(code).toBe(0);
    expect(fake.lines(LogStream.STDOUT)).toEqual(['ran']);
    expect(fake.lines(LogStream.AGENT)).toContain(
      'secret fetch refused: PermissionDenied (variables)',
    );
  });
});
