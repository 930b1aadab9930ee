import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { resolveGcpConnectionFields } from '@leoflow/core';
import { resolveGoogleConnection, type ResolvedGoogleConnection } from '@leoflow/sdk';
import { gcpField } from '../../packages/core/src/connections/gcp.js';
import {
  airflowOracleAvailability,
  GOOGLE_ORACLE_HOWTO,
  startAirflowOracle,
  type AirflowOracle,
} from '../support/airflow-oracle.js';
import { Findings } from './compare.js';

/**
 * Leoflow's google_cloud_platform resolution (packages/core/src/connections/gcp.ts, used by the
 * SDK and `leoflow connections test`) against the Google provider's own (GoogleBaseHook, its
 * credential provider, google-auth's service-account parsing), offline. Seeded as the connection
 * differential test: LEOFLOW_ORACLE_SEED / LEOFLOW_ORACLE_RUNS.
 */

const availability = airflowOracleAvailability('oracle-google');
const SEED = Number(process.env.LEOFLOW_ORACLE_SEED ?? Math.floor(Math.random() * 2 ** 31));
const RUNS = Number(process.env.LEOFLOW_ORACLE_RUNS ?? 800);
if (availability === 'skip') {
  process.stderr.write(
    `Google provider differential test skipped: no oracle-google environment; to run it, ${GOOGLE_ORACLE_HOWTO}\n`,
  );
} else if (availability === 'run') {
  process.stderr.write(`Google provider differential test: seed ${SEED}, ${RUNS} runs\n`);
}

const DEFAULT_SCOPES = ['https://www.googleapis.com/auth/cloud-platform'];
const LEGACY = 'extra__google_cloud_platform__';

let oracle: AirflowOracle;
let keys: string;
let pem: string;
const seen = new Map<string, number>();
const examples = new Map<string, unknown>();
let cases = 0;

beforeAll(async () => {
  if (availability !== 'run') return;
  oracle = await startAirflowOracle({
    env: 'oracle-google',
    script: 'test/oracle/google_oracle.py',
  });
  pem = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
    type: 'pkcs8',
    format: 'pem',
  }) as string;
  keys = mkdtempSync(join(tmpdir(), 'leoflow-google-oracle-keys-'));
  writeFileSync(join(keys, 'key.json'), JSON.stringify(serviceAccount({})));
  writeFileSync(join(keys, 'key'), JSON.stringify(serviceAccount({})));
  writeFileSync(join(keys, 'key.p12'), 'not a p12');
}, 60_000);

afterAll(async () => {
  if (availability !== 'run') return;
  await oracle.close();
  rmSync(keys, { recursive: true, force: true });
  const list = [...seen].sort().map(([k, n]) => `${k} ×${n}`);
  process.stderr.write(
    `Google provider differential: ${cases} cases; deliberate divergences seen: ${list.join(', ') || 'none'}\n`,
  );
  if (process.env.LEOFLOW_ORACLE_EXAMPLES === '1') {
    for (const [k, v] of [...examples].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
      process.stderr.write(`  ${k}: ${JSON.stringify(v)}\n`);
    }
  }
});

function serviceAccount(overrides: Record<string, unknown>): Record<string, unknown> {
  return {
    type: 'service_account',
    project_id: 'key-project',
    private_key_id: 'abc',
    private_key: pem,
    client_email: 'sa@key-project.iam.gserviceaccount.com',
    client_id: '1',
    token_uri: 'https://oauth2.googleapis.com/token',
    ...overrides,
  };
}

// ---- generators -------------------------------------------------------------------------

/** A keyfile_dict: a real key, with fields dropped, emptied, or the key mangled. */
const keyfile = fc
  .record({
    drop: fc.subarray(['type', 'project_id', 'client_email', 'private_key', 'token_uri']),
    empty: fc.subarray(['project_id', 'client_email']),
    type: fc.constantFrom('service_account', 'authorized_user', 'x'),
    privateKey: fc.constantFrom('pem', 'escaped', 'garbage-pem', 'not-pem'),
    email: fc.constantFrom('sa@p.iam.gserviceaccount.com', 'not-an-email'),
    as: fc.constantFrom('object', 'string', 'string-escaped-newlines'),
  })
  .map((k) => ({ ...k, _kind: 'keyfile' as const }));

const fieldValue = (name: string) => {
  switch (name) {
    case 'keyfile_dict':
      return fc.oneof(
        { weight: 6, arbitrary: keyfile },
        { weight: 1, arbitrary: fc.constantFrom(null, '', {}, 'not json', '[]', 0, false, []) },
      );
    case 'key_path':
      return fc.constantFrom(
        '@keys/key.json',
        '@keys/key',
        '@keys/key.p12',
        'relative/key.json',
        '',
        null,
        0,
        false,
      );
    case 'key_secret_name':
      return fc.constantFrom(
        'my-secret',
        'projects/p/secrets/s',
        'projects/p/secrets/s/versions/2',
        'a b',
        '',
        null,
      );
    case 'project':
    case 'project_id':
      return fc.constantFrom('my-project', '', null, 7);
    case 'scope':
    case 'scopes':
      return fc.constantFrom(
        'https://www.googleapis.com/auth/cloud-platform',
        'https://a.example/x, https://b.example/y',
        'https://a.example/x,,https://b.example/y ',
        ' ',
        '',
        null,
        ['https://a.example/x'],
        'not-a-url',
        3,
      );
    default:
      return fc.constantFrom(3, 0, '7', ' 7 ', '', ' ', null, -1, 1.5, 'abc', true, '+5', '2.0');
  }
};

const NAMES = [
  'keyfile_dict',
  'key_path',
  'key_secret_name',
  'project',
  'project_id',
  'scope',
  'scopes',
  'num_retries',
];

const extraSpec = fc.array(
  fc
    .tuple(fc.constantFrom(...NAMES), fc.constantFrom('short', 'short', 'legacy'))
    .chain(([name, how]) =>
      fieldValue(name).map((v) => [how === 'legacy' ? LEGACY + name : name, v] as const),
    ),
  { maxLength: 5 },
);

function materialise(spec: readonly (readonly [string, unknown])[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of spec) {
    if (typeof v === 'string' && v.startsWith('@keys/')) out[k] = join(keys, v.slice(6));
    else if (typeof v === 'object' && v !== null && '_kind' in v) out[k] = keyfileValue(v as never);
    else out[k] = v;
  }
  return out;
}

function keyfileValue(k: {
  drop: string[];
  empty: string[];
  type: string;
  privateKey: string;
  email: string;
  as: string;
}): unknown {
  const key = serviceAccount({ type: k.type, client_email: k.email });
  key.private_key =
    k.privateKey === 'pem'
      ? pem
      : k.privateKey === 'escaped'
        ? pem.replace(/\n/g, '\\n')
        : k.privateKey === 'garbage-pem'
          ? '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n'
          : 'secret';
  for (const f of k.empty) key[f] = '';
  for (const f of k.drop) delete key[f];
  if (k.as === 'object') return key;
  const text = JSON.stringify(key);
  return k.as === 'string' ? text : text.replace(/\\n/g, '\\\\n');
}

// ---- the comparison -------------------------------------------------------------------

type Side<T> = { value: T } | { error: string };
interface GcpAnswer {
  fields: Record<string, Side<unknown>>;
  num_retries: Side<number>;
  scopes: Side<string[]>;
  credentials:
    { source: string; project: string | null; email?: string | null } | { error: string };
}

function attempt<T>(fn: () => T): T | Error {
  try {
    return fn();
  } catch (e) {
    return e instanceof Error ? e : new Error(String(e));
  }
}

const truthy = (v: unknown) =>
  !(
    v === null ||
    v === undefined ||
    v === '' ||
    v === 0 ||
    v === false ||
    (Array.isArray(v) && v.length === 0) ||
    (typeof v === 'object' && v !== null && Object.keys(v).length === 0)
  );

function compare(
  extra: Record<string, unknown>,
  a: GcpAnswer,
  sdk: ResolvedGoogleConnection | Error,
  f: Findings,
): void {
  // 1. Field lookup: short name first, legacy name only when the short one is absent.
  for (const name of [
    'keyfile_dict',
    'key_path',
    'key_secret_name',
    'project',
    'scope',
    'num_retries',
  ]) {
    const theirs = a.fields[name]!;
    const ours = gcpField(extra, [name])?.value ?? null;
    if ('error' in theirs || JSON.stringify(theirs.value) !== JSON.stringify(ours)) {
      f.problem(
        `get_field(${name}): provider ${JSON.stringify(theirs)}, Leoflow ${JSON.stringify(ours)}`,
      );
    }
  }

  const ours = attempt(() => resolveGcpConnectionFields(extra));

  // 2. num_retries
  const retriesRaw = gcpField(extra, ['num_retries'])?.value ?? null;
  if (!(ours instanceof Error)) {
    if ('error' in a.num_retries)
      f.problem(`num_retries: provider ${a.num_retries.error}, Leoflow ${ours.num_retries}`);
    else if (a.num_retries.value !== ours.num_retries)
      f.problem(`num_retries: provider ${a.num_retries.value}, Leoflow ${ours.num_retries}`);
  } else if (!('error' in a.num_retries) && /num_retries/.test(ours.message)) {
    // int(): -1, 1.5 → 1, True → 1, "+5"; Leoflow takes a non-negative integer or its digits.
    f.diverge('gcp-num-retries-strict');
  }
  void retriesRaw;

  // 3. scopes: the provider reads `scope` only, splits on "," and strips, keeps empty items.
  if (!(ours instanceof Error)) {
    const mine = ours.scopes.length === 0 ? DEFAULT_SCOPES : ours.scopes;
    // Leoflow also reads `scopes` (first): where it is present, the provider reads another field.
    const usesScopes = 'scopes' in extra || (!('scope' in extra) && `${LEGACY}scopes` in extra);
    if (
      usesScopes &&
      ('error' in a.scopes || JSON.stringify(a.scopes.value) !== JSON.stringify(mine))
    ) {
      f.diverge('gcp-scopes-field');
    } else if ('error' in a.scopes) {
      if (Array.isArray(gcpField(extra, ['scope'])?.value)) f.diverge('gcp-scope-list');
      else f.problem(`scopes: provider ${a.scopes.error}, Leoflow ${JSON.stringify(mine)}`);
    } else if (JSON.stringify(a.scopes.value) !== JSON.stringify(mine)) {
      if (
        a.scopes.value.some((s) => s === '') ||
        (a.scopes.value.length === 1 && a.scopes.value[0] === '')
      )
        f.diverge('gcp-scope-empties-dropped');
      else
        f.problem(
          `scopes: provider ${JSON.stringify(a.scopes.value)}, Leoflow ${JSON.stringify(mine)}`,
        );
    }
  }

  // 4. Which credential source, and what the key gives.
  const set = (['keyfile_dict', 'key_path', 'key_secret_name'] as const).filter((n) =>
    truthy(gcpField(extra, [n])?.value ?? null),
  );
  const cred = a.credentials;
  // A scope the provider cannot split fails its credentials too (judged above).
  if ('error' in cred && 'error' in a.scopes && cred.error === a.scopes.error) return;
  if ('error' in cred && /mutually exclusive/.test(cred.error)) {
    // The provider refuses several key fields; Leoflow takes the first set (not null or "") in
    // ADR 0035's order (keyfile_dict → key_path → key_secret_name) and its check says so.
    const oursSet = (['keyfile_dict', 'key_path', 'key_secret_name'] as const).filter(
      (n) => gcpField(extra, [n]) !== null,
    );
    if (ours instanceof Error || ours.source === oursSet[0]) f.diverge('gcp-several-sources');
    else f.problem(`several sources: Leoflow chose ${ours.source}, not ${oursSet[0]}`);
    return;
  }
  if (ours instanceof Error) {
    // Leoflow refuses a value it cannot interpret (LF_GCP_CONN_INVALID). Fine where the
    // provider fails too; otherwise each reason is a listed divergence.
    if ('error' in cred && !/mutually exclusive/.test(cred.error)) return;
    const m = ours.message;
    if (/num_retries/.test(m)) return; // counted above
    if (/project/.test(m)) f.diverge('gcp-project-must-be-string');
    else if (/scope/.test(m)) f.diverge('gcp-scope-list');
    else if (/keyfile_dict|key_path|key_secret_name/.test(m))
      f.diverge('gcp-falsy-key-field-is-set');
    else f.problem(`Leoflow refuses (${m}); the provider resolves ${JSON.stringify(cred)}`);
    return;
  }
  const theirSource =
    'error' in cred ? (set[0] ?? 'adc') : cred.source === 'key' ? set[0] : cred.source;
  if (theirSource !== ours.source) {
    // A key field that is set but falsy ({} , 0, false): unset for the provider (`if keyfile_dict:`),
    // set for Leoflow, whose check then fails it rather than quietly falling back to ADC.
    if (ours.source !== 'adc' && !truthy(gcpField(extra, [ours.source])?.value))
      f.diverge('gcp-falsy-key-field-is-set');
    else f.problem(`source: provider ${theirSource}, Leoflow ${ours.source}`);
    return;
  }
  if (ours.source === 'keyfile_dict' || ours.source === 'key_path') {
    // What a task gets: Leoflow's SDK (resolveGoogleConnection, which reads key_path and parses
    // the key) against the provider with google-auth.
    const providerOk = !('error' in cred);
    const sdkOk = !(sdk instanceof Error);
    const err = 'error' in cred ? cred.error : '';
    if (providerOk !== sdkOk) {
      if (!providerOk && /token_uri/.test(err)) {
        // google-auth (Python) requires token_uri; the SDK's google-auth-library does not.
        f.diverge('gcp-key-token-uri-not-required');
      } else if (!providerOk && /Unrecognised extension|P12/.test(err)) {
        f.diverge('gcp-key-path-any-extension');
      } else if (providerOk && sdk instanceof Error && /client_email/.test(sdk.message)) {
        // google-auth builds credentials from a key whose client_email is "" (they fail at the
        // first token request); the SDK refuses the key at once.
        f.diverge('gcp-key-empty-client-email');
      } else if (providerOk && sdk instanceof Error && /service_account/.test(sdk.message)) {
        // google-auth's service-account path reads any key with the right fields; the SDK wants
        // "type": "service_account" when a type is given.
        f.diverge('gcp-key-type-must-be-service-account');
      } else {
        f.problem(
          `${ours.source}: provider ${JSON.stringify(cred)}, Leoflow's SDK ${sdk instanceof Error ? sdk.message : 'ok'}`,
        );
      }
      return;
    }
    if (providerOk && !(sdk instanceof Error)) {
      const c = cred as { project: string | null; email?: string | null };
      // google-auth gives "" for a key whose project_id is ""; Leoflow gives null: no project.
      if ((c.project || null) !== sdk.projectId) {
        if (gcpField(extra, ['project']) === null && gcpField(extra, ['project_id']) !== null) {
          f.diverge('gcp-project-id-field');
        } else {
          f.problem(
            `project: provider ${JSON.stringify(c.project)}, Leoflow ${JSON.stringify(sdk.projectId)}`,
          );
        }
      }
      if ((c.email ?? null) !== (sdk.credentials?.client_email ?? null)) {
        f.problem(
          `client_email: provider ${JSON.stringify(c.email)}, Leoflow ${JSON.stringify(sdk.credentials?.client_email)}`,
        );
      }
    }
  }
}

describe.runIf(availability === 'missing')('Google provider differential (oracle missing)', () => {
  it('requires the oracle-google environment (CI=true or LEOFLOW_TEST_REQUIRE_AIRFLOW=1)', () => {
    throw new Error(
      `the oracle-google environment is required but missing; to fix: ${GOOGLE_ORACLE_HOWTO}`,
    );
  });
});

describe.runIf(availability === 'run')(
  'Leoflow vs the Google provider 22.8.0: credential resolution',
  { timeout: 300_000 },
  () => {
    it('field lookup, num_retries, scopes, the credential source and what a key gives, as GoogleBaseHook has them', async () => {
      await fc.assert(
        fc.asyncProperty(extraSpec, async (spec) => {
          const extra = materialise(spec);
          const f = new Findings();
          const t0 = Date.now();
          const answer = (await oracle.ask({ op: 'gcp', extra })) as unknown as GcpAnswer;
          const t1 = Date.now();
          // The SDK's own resolution, offline: key_secret_name would call Secret Manager.
          const fields = attempt(() => resolveGcpConnectionFields(extra));
          const sdk =
            !(fields instanceof Error) && fields.source === 'key_secret_name'
              ? new Error('not offline')
              : await resolveGoogleConnection('oracle_gcp', {
                  env: {
                    AIRFLOW_CONN_ORACLE_GCP: JSON.stringify({
                      conn_type: 'google_cloud_platform',
                      extra,
                    }),
                  },
                }).catch((e: unknown) => (e instanceof Error ? e : new Error(String(e))));
          if (process.env.LEOFLOW_ORACLE_TIMING === '1' && Date.now() - t0 > 300) {
            process.stderr.write(
              `slow case: oracle ${t1 - t0} ms (python ${String((answer as unknown as { took_ms?: number }).took_ms)} ms), sdk ${Date.now() - t1} ms: ${JSON.stringify(spec).slice(0, 300)}\n`,
            );
          }
          compare(extra, answer, sdk, f);
          cases++;
          for (const d of f.divergences) {
            seen.set(d, (seen.get(d) ?? 0) + 1);
            if (!examples.has(d)) examples.set(d, spec);
          }
          if (f.problems.length > 0)
            throw new Error(`${f.problems.join('\n')}\nextra spec: ${JSON.stringify(spec)}`);
        }),
        { seed: SEED, numRuns: RUNS, endOnFailure: false },
      );
    });
  },
);
