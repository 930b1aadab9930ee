import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CLI,
  cli,
  REPO,
  scratchDir,
  startStandalone,
  writeDag,
  type Standalone,
} from '../support/processes.js';

/**
 * Issue 33 (small item): `leoflow tasks logs` wrote a task's output to the operator's terminal
 * byte for byte, so a task could send escape sequences to it — OSC 52 (write the clipboard),
 * OSC 8 (a link whose text lies), cursor moves that overwrite earlier lines. On a terminal the
 * CLI now shows control characters (but tab and newline) as visible escapes; `--raw` and a
 * stdout that is not a terminal keep the bytes.
 */
const ESC = '\u001b';
let scratch: ReturnType<typeof scratchDir>;
let sa: Standalone;
let runId = '';
const env = () => ({ LEOFLOW_URL: sa.url, LEOFLOW_TOKEN: sa.token });

beforeAll(async () => {
  scratch = scratchDir('leoflow-sec-esc-');
  const dags = join(scratch.dir, 'dags');
  writeDag(
    dags,
    'esc',
    `dag_id: esc
tasks:
  - task_id: emit
    command: |
      printf 'clip \\033]52;c;cHduZWQ=\\007 end\\n'
      printf 'link \\033]8;;https://evil.example\\033\\\\safe\\033]8;;\\033\\\\ end\\n'
      printf 'move \\033[2A\\033[2Koverwritten\\r end\\ttab\\n'
`,
  );
  sa = await startStandalone({ dataDir: join(scratch.dir, 'data'), dagsFolder: dags });
  const r = await cli(['runs', 'trigger', 'esc', '--wait', '-o', 'json'], env());
  expect(r.code, r.stderr).toBe(0);
  runId = (JSON.parse(r.stdout) as { run: { run_id: string } }).run.run_id;
});

afterAll(async () => {
  await sa?.stop();
  scratch?.cleanup();
});

/** Runs the CLI with its stdout on a pseudo-terminal (util-linux `script`). */
function onTerminal(args: string[]): string {
  const cmd = [process.execPath, CLI, ...args]
    .map((a) => `'${a.replace(/'/g, `'\\''`)}'`)
    .join(' ');
  const r = spawnSync('script', ['-qec', cmd, '/dev/null'], {
    cwd: REPO,
    env: { ...process.env, ...env() },
    encoding: 'utf8',
    timeout: 60_000,
  });
  expect(r.status, r.stderr).toBe(0);
  return r.stdout;
}

describe("a task's escape sequences never reach the operator's terminal", () => {
  it('on a terminal: every control character but tab and newline is shown as an escape', () => {
    const out = onTerminal(['tasks', 'logs', runId, 'emit', '--dag', 'esc']);
    expect(out).toContain('clip \\x1b]52;c;cHduZWQ=\\x07 end');
    expect(out).toContain('link \\x1b]8;;https://evil.example\\x1b\\safe');
    expect(out).toContain('move \\x1b[2A\\x1b[2Koverwritten\\x0d end\ttab');
    // nothing the task wrote arrives as a live control character (the pty adds only CR LF)
    expect(out.replace(/\r\n/g, '\n')).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
  });

  it('--raw keeps the bytes on a terminal; a pipe gets them as they are', async () => {
    expect(onTerminal(['tasks', 'logs', runId, 'emit', '--dag', 'esc', '--raw'])).toContain(
      `clip ${ESC}]52;c;cHduZWQ=\u0007 end`,
    );
    const piped = await cli(['tasks', 'logs', runId, 'emit', '--dag', 'esc'], env());
    expect(piped.stdout).toContain(`clip ${ESC}]52;c;cHduZWQ=\u0007 end`);
  });
});
