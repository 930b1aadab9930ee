import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  api,
  cli,
  scratchDir,
  startStandalone,
  writeDag,
  type Standalone,
} from '../support/processes.js';

/**
 * Issue 10 item 2: a DAG file that is a symlink (or lies under a symlinked folder) pointing out
 * of the DAG folder is never read — not by the root server loading its dags folder, not by
 * `leoflow dags push` — so the content of the server's keyring, its admin token or /etc/shadow
 * never becomes a task command any viewer can read. A link that stays inside the folder works.
 */

const dagYaml = (dagId: string, script: string) =>
  `dag_id: ${dagId}\nschedule: null\ntasks:\n  - task_id: t\n    type: bash\n    script: ${script}\n`;

const INSIDE_SCRIPT = 'echo inside-script-ran-canary-7f3a\n';
const OUTSIDE_YAML_CANARY = 'outside-yaml-canary-c81d';

interface Case {
  name: string;
  /** the file whose content must never be read */
  target: () => string;
  make: (dagsRoot: string) => string;
}

let scratch: { dir: string; cleanup: () => void };
let dataDir: string;
let dags: string;
let outside: string;
let s: Standalone;

function scriptLinkedTo(dagId: string, target: () => string) {
  return (root: string) => {
    const dir = writeDag(root, dagId, dagYaml(dagId, 'run.sh'));
    symlinkSync(target(), join(dir, 'run.sh'));
    return dir;
  };
}

const cases: Case[] = [
  {
    name: 'a script symlinked to <data-dir>/keys/keyring.json',
    target: () => join(dataDir, 'keys', 'keyring.json'),
    make: scriptLinkedTo('leak_keyring', () => join(dataDir, 'keys', 'keyring.json')),
  },
  {
    name: 'a script symlinked to <data-dir>/admin.token',
    target: () => join(dataDir, 'admin.token'),
    make: scriptLinkedTo('leak_token', () => join(dataDir, 'admin.token')),
  },
  {
    name: 'a script symlinked to /etc/shadow',
    target: () => '/etc/shadow',
    make: scriptLinkedTo('leak_shadow', () => '/etc/shadow'),
  },
  {
    name: 'a script under a symlinked directory (scripts -> <data-dir>/keys)',
    target: () => join(dataDir, 'keys', 'keyring.json'),
    make: (root) => {
      const dir = writeDag(root, 'leak_dir', dagYaml('leak_dir', 'scripts/keyring.json'));
      symlinkSync(join(dataDir, 'keys'), join(dir, 'scripts'));
      return dir;
    },
  },
  {
    name: 'a leoflow.yaml symlinked to a file outside the folder',
    target: () => join(outside, 'outside.yaml'),
    make: (root) => {
      const dir = join(root, 'leak_yaml');
      mkdirSync(dir);
      symlinkSync(join(outside, 'outside.yaml'), join(dir, 'leoflow.yaml'));
      return dir;
    },
  },
];

/** What must never appear anywhere: the target's content, line by line (long lines only). */
function secretLines(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.length >= 12);
}

beforeAll(async () => {
  scratch = scratchDir('lf-symlinks-');
  dataDir = join(scratch.dir, 'data');
  dags = join(scratch.dir, 'dags');
  outside = join(scratch.dir, 'outside');
  mkdirSync(dags);
  mkdirSync(outside);
  writeFileSync(
    join(outside, 'outside.yaml'),
    `dag_id: leak_yaml\ndescription: ${OUTSIDE_YAML_CANARY}\nschedule: null\ntasks:\n  - task_id: t\n    type: bash\n    command: echo ${OUTSIDE_YAML_CANARY}\n`,
  );
  // A DAG folder that is itself a symlink to a folder outside the dags folder.
  const linkedTarget = writeDag(outside, 'linked_target', dagYaml('leak_linked', 'run.sh'), {
    'run.sh': `echo ${OUTSIDE_YAML_CANARY}\n`,
  });
  symlinkSync(linkedTarget, join(dags, 'leak_linked'));
  // Dangling until the server's first start creates the data dir; resolved when it loads DAGs.
  for (const c of cases) c.make(dags);
  // Two-sided: a symlink that stays inside the DAG folder still works.
  const ok = writeDag(dags, 'inside_link', dagYaml('inside_link', 'run.sh'));
  mkdirSync(join(ok, 'real'));
  writeFileSync(join(ok, 'real', 'script.sh'), INSIDE_SCRIPT);
  symlinkSync(join(ok, 'real', 'script.sh'), join(ok, 'run.sh'));

  s = await startStandalone({ dataDir, dagsFolder: dags });
}, 60_000);

afterAll(async () => {
  await s?.stop();
  scratch?.cleanup();
});

async function storedDagIds(): Promise<string[]> {
  const r = await api<{ dags: { dag_id: string }[] }>(s, 'GET', '/api/v1/dags?limit=1000');
  return r.dags.map((d) => d.dag_id);
}

async function storedSpecs(): Promise<string> {
  const out: string[] = [];
  for (const id of await storedDagIds()) {
    const v = await api<{ spec: unknown }>(s, 'GET', `/api/v1/dags/${id}/versions/1`);
    out.push(JSON.stringify(v.spec));
  }
  return out.join('\n');
}

describe('DAG files never follow a symlink out of the DAG folder', () => {
  it('folder load keeps the DAG whose symlink stays inside its folder (two-sided)', async () => {
    expect(await storedDagIds()).toContain('inside_link');
    const v = await api<{ spec: { tasks: { command: string }[] } }>(
      s,
      'GET',
      '/api/v1/dags/inside_link/versions/1',
    );
    expect(v.spec.tasks[0]?.command).toBe(INSIDE_SCRIPT);
  });

  it('folder load refuses a DAG folder that is a symlink to a folder elsewhere', async () => {
    expect(await storedDagIds()).not.toContain('leak_linked');
    expect(s.output()).toMatch(/LF_DAG_FILE_OUTSIDE_FOLDER[^\n]*leak_linked/);
    expect(s.output()).not.toContain(OUTSIDE_YAML_CANARY);
  });

  for (const c of cases) {
    it(`folder load refuses ${c.name}; its content is stored and logged nowhere`, async () => {
      const dagId = c.name.includes('leoflow.yaml') ? 'leak_yaml' : undefined;
      const ids = await storedDagIds();
      for (const id of ids) expect(id.startsWith('leak_')).toBe(false);
      if (dagId) expect(ids).not.toContain(dagId);
      expect(s.output()).toContain('LF_DAG_FILE_OUTSIDE_FOLDER');
      const specs = await storedSpecs();
      const lines = secretLines(c.target());
      expect(lines.length).toBeGreaterThan(0);
      for (const line of lines) {
        expect(specs).not.toContain(line);
        expect(s.output()).not.toContain(line);
      }
    });

    it(`dags push refuses ${c.name}; its content is in no output and nothing is stored`, async () => {
      const root = join(scratch.dir, `push-${cases.indexOf(c)}`);
      mkdirSync(root);
      const dir = c.make(root);
      const r = await cli(['dags', 'push', dir, '--url', s.url, '--token', s.token]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('LF_DAG_FILE_OUTSIDE_FOLDER');
      const lines = secretLines(c.target());
      for (const line of lines) {
        expect(r.stdout).not.toContain(line);
        expect(r.stderr).not.toContain(line);
        expect(await storedSpecs()).not.toContain(line);
      }
      for (const id of await storedDagIds()) expect(id.startsWith('leak_')).toBe(false);
    });
  }

  it('dags push of a symlink that stays inside the folder registers the script (two-sided)', async () => {
    const root = join(scratch.dir, 'push-ok');
    mkdirSync(root);
    const dir = writeDag(root, 'pushed_inside', dagYaml('pushed_inside', 'run.sh'));
    mkdirSync(join(dir, 'lib'));
    writeFileSync(join(dir, 'lib', 'real.sh'), INSIDE_SCRIPT);
    symlinkSync(join(dir, 'lib'), join(dir, 'linked_lib'));
    symlinkSync('linked_lib/real.sh', join(dir, 'run.sh'));
    const r = await cli(['dags', 'push', dir, '--url', s.url, '--token', s.token]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const v = await api<{ spec: { tasks: { command: string }[] } }>(
      s,
      'GET',
      '/api/v1/dags/pushed_inside/versions/1',
    );
    expect(v.spec.tasks[0]?.command).toBe(INSIDE_SCRIPT);
  });
});
