import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { logDestination } from '../../src/util/logger.js';

// Server logs (issue 40): readable lines on a terminal, JSON when not — an import error logged
// by the watched DAGs folder must read as one line with its place and hint, not JSON with an
// embedded newline.

function sink(isTTY: boolean): { stream: Writable & { isTTY?: boolean }; text: () => string } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      text += chunk.toString('utf8');
      done();
    },
  }) as Writable & { isTTY?: boolean };
  stream.isTTY = isTTY;
  return { stream, text: () => text };
}

async function logOneImportError(isTTY: boolean): Promise<string> {
  const out = sink(isTTY);
  const logger = pino({ level: 'info', base: { svc: 'leoflow' } }, logDestination(out.stream));
  logger.error(
    {
      file: 'etl/leoflow.yaml',
      line: 7,
      column: 27,
      code: 'LF_DAG_UNKNOWN_UPSTREAM',
      hint: 'did you mean "transform"?',
    },
    'DAG not loaded: etl/leoflow.yaml:7:27 LF_DAG_UNKNOWN_UPSTREAM tasks[1].depends_on[1]: no such task',
  );
  logger.flush();
  await new Promise((r) => setImmediate(r));
  return out.text();
}

describe('server log format', () => {
  it('is one readable line per record on a terminal', async () => {
    const text = await logOneImportError(true);
    expect(text.trimEnd().split('\n')).toHaveLength(1);
    expect(text).toMatch(
      /^\d\d:\d\d:\d\d ERROR DAG not loaded: etl\/leoflow\.yaml:7:27 LF_DAG_UNKNOWN_UPSTREAM .*hint=did you mean "transform"\?/,
    );
    expect(text).not.toContain('{"level"');
  });

  it('is one JSON record per line otherwise', async () => {
    const text = await logOneImportError(false);
    const rec = JSON.parse(text.trim()) as Record<string, unknown>;
    expect(rec).toMatchObject({ level: 50, file: 'etl/leoflow.yaml', line: 7, column: 27 });
  });
});
