// Builds dist/leoflow-sandbox from leoflow-sandbox.c with the machine's C compiler (cc, else
// gcc): the sandbox helper every attempt starts through (docs/security.md, "The sandbox"). Nothing
// prebuilt is downloaded. Linked statically where the C library allows it (no dynamic loader
// on the path of every attempt), dynamically otherwise. Without a compiler the build says so and
// goes on: agents then run attempts with the per-uid fallback, which `leoflow doctor` names.
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, '..', 'dist');
const source = join(here, 'leoflow-sandbox.c');
const out = join(dist, 'leoflow-sandbox');

export function buildSandboxHelper({ quiet = false } = {}) {
  mkdirSync(dist, { recursive: true });
  const tmp = `${out}.${process.pid}.tmp`;
  const flags = ['-std=gnu11', '-O2', '-Wall', '-Wextra', '-Werror', '-s', '-o', tmp, source];
  for (const cc of [process.env.CC, 'cc', 'gcc'].filter(Boolean)) {
    for (const link of [['-static'], []]) {
      const r = spawnSync(cc, [...link, ...flags], { encoding: 'utf8' });
      if (r.error) break; // no such compiler: try the next
      if (r.status === 0) {
        chmodSync(tmp, 0o755);
        renameSync(tmp, out);
        return out;
      }
      if (link.length === 0 && !quiet) process.stderr.write(r.stderr);
    }
  }
  rmSync(tmp, { force: true });
  if (!quiet)
    process.stderr.write(
      'leoflow-sandbox: no C compiler (cc/gcc) built packages/agent/native/leoflow-sandbox.c; attempts will run without namespaces (install gcc and libc6-dev, then npm run build)\n',
    );
  return null;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) buildSandboxHelper();
