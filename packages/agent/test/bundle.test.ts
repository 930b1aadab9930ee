import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LiteHeaders } from '../src/lite-headers.js';

const PKG = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ENTRY = path.join(PKG, 'dist/leoflow-agent.mjs');
const CJS = path.join(PKG, 'dist/leoflow-agent.cjs');
const CODE_CACHE = path.join(PKG, 'bundle/code-cache.mjs');

function snapshot(h: Iterable<[string, string]>): [string, string][] {
  return [...h];
}

describe('LiteHeaders (the bundled agent’s Headers)', () => {
  const headerName = fc.constantFrom(
    'authorization',
    'Authorization',
    'content-type',
    'grpc-status',
    'Grpc-Message',
    'set-cookie',
    'Set-Cookie',
    'x-a',
    'X-B',
  );
  const headerValue = fc.oneof(
    fc.constantFrom('', ' padded ', '\tx\t', 'a, b', 'Bearer t0k3n', 'deflate,gzip'),
    fc.stringMatching(/^[ -~]{0,12}$/),
  );
  const op = fc.oneof(
    fc.tuple(fc.constant('append' as const), headerName, headerValue),
    fc.tuple(fc.constant('set' as const), headerName, headerValue),
    fc.tuple(fc.constant('delete' as const), headerName, fc.constant('')),
  );

  it('behaves like the WHATWG Headers for the operations connect-es uses', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(headerName, headerValue), { maxLength: 4 }),
        fc.array(op, { maxLength: 12 }),
        (init, ops) => {
          const a = new Headers(init);
          const b = new LiteHeaders(init);
          for (const [kind, n, v] of ops) {
            if (kind === 'delete') {
              a.delete(n);
              b.delete(n);
            } else {
              a[kind](n, v);
              b[kind](n, v);
            }
            expect(b.get(n)).toBe(a.get(n));
            expect(b.has(n)).toBe(a.has(n));
          }
          expect(snapshot(b)).toEqual(snapshot(a));
          expect(b.getSetCookie()).toEqual(a.getSetCookie());
          const seenA: string[] = [];
          const seenB: string[] = [];
          a.forEach((v, k) => seenA.push(`${k}=${v}`));
          b.forEach((v, k) => seenB.push(`${k}=${v}`));
          expect(seenB).toEqual(seenA);
          // a copy, as ConnectError makes of its metadata
          expect(snapshot(new LiteHeaders(b))).toEqual(snapshot(new Headers(a)));
        },
      ),
    );
  });

  it('takes a record and refuses what Headers refuses', () => {
    const rec = { 'Content-Type': 'application/grpc', te: 'trailers' };
    expect(snapshot(new LiteHeaders(rec))).toEqual(snapshot(new Headers(rec)));
    for (const [n, v] of [
      ['bad name', 'x'],
      ['', 'x'],
      ['x', 'a\nb'],
      ['x', 'a\rb'],
      ['x', 'a\0b'],
    ] as const) {
      expect(() => new Headers([[n, v]])).toThrow(TypeError);
      expect(() => new LiteHeaders([[n, v]])).toThrow(TypeError);
    }
    expect(Object.prototype.toString.call(new LiteHeaders())).toBe('[object Headers]');
  });
});

describe('agent bundle and its V8 code cache', () => {
  const built = existsSync(ENTRY) && existsSync(CJS);
  if (!built) {
    throw new Error(`${ENTRY} is missing: run \`npm run build\` before these tests`);
  }

  const probe = (body: string) => {
    const r = spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import { readFileSync } from 'node:fs';
         import { Script, constants } from 'node:vm';
         import { readCachedData, wrapSource } from ${JSON.stringify(CODE_CACHE)};
         const file = ${JSON.stringify(CJS)};
         ${body}`,
      ],
      { encoding: 'utf8', env: {} },
    );
    expect(r.status, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as Record<string, unknown>;
  };

  it('the cache the build produced matches the bundle and V8 accepts it', () => {
    const out = probe(`
      const wrapped = wrapSource(readFileSync(file, 'utf8'));
      const cachedData = readCachedData(file + '.cache', wrapped);
      const s = new Script(wrapped, { filename: file, cachedData,
        importModuleDynamically: constants.USE_MAIN_CONTEXT_DEFAULT_LOADER });
      console.log(JSON.stringify({ found: cachedData !== undefined, rejected: s.cachedDataRejected }));
    `);
    expect(out).toEqual({ found: true, rejected: false });
  });

  it('the cache holds the functions start-up never runs (it was compiled eagerly)', () => {
    // What a lazily compiled bundle caches after the same empty-environment start: top-level
    // code and start-up's functions only. The build's cache must hold far more (the RPC path
    // and the attempt's code), or every agent compiles those on its first call.
    const lazy = probe(`
      const wrapped = wrapSource(readFileSync(file, 'utf8'));
      const s = new Script(wrapped, { filename: file,
        importModuleDynamically: constants.USE_MAIN_CONTEXT_DEFAULT_LOADER });
      process.exitCode = 0;
      process.exit = () => {
        console.log(JSON.stringify({ bytes: s.createCachedData().length }));
        process.reallyExit(0);
      };
      const { createRequire } = await import('node:module');
      const module = { exports: {} };
      s.runInThisContext()(module.exports, createRequire(file), module, file, '.');
    `);
    const built = readFileSync(`${CJS}.cache`).length;
    expect(built).toBeGreaterThan(2 * Number(lazy['bytes']));
  });

  it('a cache made for other source (even of the same length) is not used', () => {
    const out = probe(`
      const source = readFileSync(file, 'utf8');
      const other = wrapSource(source.replace('leoflow-agent', 'leoflow-agenX'));
      console.log(JSON.stringify({
        sameLength: other.length === wrapSource(source).length,
        found: readCachedData(file + '.cache', other) !== undefined,
        missing: readCachedData(file + '.nope', wrapSource(source)) !== undefined,
      }));
    `);
    expect(out).toEqual({ sameLength: true, found: false, missing: false });
  });

  it('embeds its proto file descriptors decoded, without booting descriptor.proto', () => {
    const text = readFileSync(CJS, 'utf8');
    expect(text).toContain('predecoded');
    expect(text).not.toContain('google/protobuf/descriptor.proto');
  });

  it('carries only the parts of @leoflow/core it uses (no DAG compiler, YAML, cron or JSON Schema)', () => {
    // esbuild heads each bundled module with a `// <path>` comment; every module in the bundle
    // is source V8 reads, hashes and deserializes at each agent start (the core index once
    // pulled yaml and croner in, doubling the bundle and its code cache).
    const modules = readFileSync(CJS, 'utf8')
      .split('\n')
      .filter((l) => /^\/\/ \S+\.(?:[cm]?js|ts|json)$/.test(l))
      .map((l) => l.slice(3));
    expect(modules.some((m) => m.includes('core/src/config/'))).toBe(true);
    // The secrets masker (issue 34) masks a Connection's URI and its parts, so it carries the
    // URI parser and the masking rules of core's connections (uri, percent, errors, masking),
    // and nothing else of that folder (no import/export, JSON forms or GCP resolution).
    const maskerNeeds = /core\/src\/connections\/(?:uri|percent|errors|masking)\.ts$/;
    const unwanted = modules.filter(
      (m) =>
        /node_modules\/(?:yaml|croner|ajv)\/|core\/src\/(?:dag|schedule|connections)\//.test(m) &&
        !maskerNeeds.test(m),
    );
    expect(unwanted).toEqual([]);
  });

  it('the entry runs the bundle (which refuses an empty environment with exit 2)', () => {
    const r = spawnSync(process.execPath, [ENTRY], { encoding: 'utf8', env: {} });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('LEOFLOW_AGENT_URL is required');
  });
});
