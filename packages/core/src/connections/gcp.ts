import { VaultError } from '../errors/leoflow-error.js';
import { NonFiniteNumberError, parsePyJson, PyJsonSyntaxError, pyJsonToJs } from './py-json.js';
import { isPlainObject } from './uri.js';

/**
 * google_cloud_platform connections (ADR 0035, DESIGN §7): Leoflow is not a key manager.
 * Credentials are resolved in the task, in the order keyfile_dict → key_path → key_secret_name
 * → Application Default Credentials; the control plane only checks structure.
 */

export const GCP_CONN_TYPE = 'google_cloud_platform';
export const GCP_LEGACY_PREFIX = 'extra__google_cloud_platform__';

export type GcpCredentialSource = 'keyfile_dict' | 'key_path' | 'key_secret_name' | 'adc';

/** Resolution order; the first source that is set wins. */
export const GCP_CREDENTIAL_ORDER: readonly GcpCredentialSource[] = [
  'keyfile_dict',
  'key_path',
  'key_secret_name',
  'adc',
];

export interface GcpConnectionFields {
  source: GcpCredentialSource;
  /** Explicit project, else the key file's project_id, else null (ADC detects it at runtime). */
  project: string | null;
  /** Trimmed, empties dropped; [] means the client library's default scopes. */
  scopes: string[];
  /** 5 when missing, null or empty, as the Google provider's `num_retries`; an explicit 0 stays 0. */
  num_retries: number;
  /**
   * Set only when `source` is keyfile_dict: the parsed key, its `private_key` with literal `\n`
   * pairs turned into newlines (as the provider does for a key pasted into a form). Never log it.
   */
  keyfile_dict: Record<string, unknown> | null;
  /** Set only when `source` is key_path. */
  key_path: string | null;
  /** Set only when `source` is key_secret_name. */
  key_secret_name: string | null;
}

export interface GcpCheck {
  name: string;
  ok: boolean;
  message: string;
  /** The value cannot even be interpreted (resolution fails), as opposed to looking wrong. */
  hard?: boolean;
}

interface Found {
  value: unknown;
  /** The key the value was read from, e.g. `scope` or `extra__google_cloud_platform__key_path`. */
  key: string;
}

/** The provider's default `num_retries` (GoogleBaseHook.num_retries). */
export const GCP_DEFAULT_NUM_RETRIES = 5;

/**
 * The value of a field as the provider's `get_field` reads it: the first short name present
 * decides — its value, or unset when it is `null` or `""` — and only when no short name is
 * present at all does the legacy `extra__google_cloud_platform__<name>` count (same rule). So a
 * field cleared in a form reads as unset; it never revives a stale legacy key.
 */
export function gcpField(extra: Record<string, unknown>, names: readonly string[]): Found | null {
  for (const group of [names, names.map((n) => GCP_LEGACY_PREFIX + n)]) {
    for (const key of group) {
      if (!Object.prototype.hasOwnProperty.call(extra, key)) continue;
      const value = extra[key];
      return value === undefined || value === null || value === '' ? null : { value, key };
    }
  }
  return null;
}

const FIELD_NAMES: Record<Exclude<GcpCredentialSource, 'adc'>, readonly string[]> = {
  keyfile_dict: ['keyfile_dict'],
  key_path: ['key_path'],
  key_secret_name: ['key_secret_name'],
};

const KEYFILE_REQUIRED = ['type', 'client_email', 'private_key', 'project_id'] as const;
const EMAIL = /^[^\s@]{1,128}@[^\s@]{1,128}$/;
const SECRET_NAME =
  /^projects\/[A-Za-z0-9][A-Za-z0-9.:_-]*\/secrets\/[A-Za-z0-9_-]{1,255}(\/versions\/(latest|[1-9][0-9]*))?$/;
/** A bare secret id, which the provider looks up in the ADC project. */
export const GCP_BARE_SECRET_NAME = /^[A-Za-z0-9_-]{1,255}$/;
const PEM_PRIVATE_KEY = /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]+-----END [A-Z ]*PRIVATE KEY-----/;
const SCOPE_URL = /^https?:\/\/[A-Za-z0-9.-]+(:[0-9]+)?(\/\S*)?$/;

/**
 * Resolves the fields the task needs, exactly as the SDK must: short names first, legacy names
 * as fallback, the first credential source set wins. Throws `LF_GCP_CONN_INVALID` only when a
 * value cannot be interpreted at all (keyfile_dict not an object or JSON of one, scopes not a
 * string or list of strings, num_retries not a non-negative integer, a path/name/project that is
 * not a string); whether the values *look right* is `checkConnectionStructure`'s job.
 */
export function resolveGcpConnectionFields(
  extra: Record<string, unknown> | string | null,
): GcpConnectionFields {
  const { fields, checks } = analyzeGcpExtra(extra);
  const hard = checks.find((c) => c.hard === true);
  if (hard !== undefined || fields === null) {
    throw new VaultError(
      'LF_GCP_CONN_INVALID',
      `google_cloud_platform connection: ${hard?.message ?? 'extra is not usable'}. ` +
        'Fix the connection (leoflow connections test <id> lists every problem).',
    );
  }
  return fields;
}

/** Every check for a GCP extra, and the resolved fields unless the extra is unreadable. */
export function analyzeGcpExtra(extra: Record<string, unknown> | string | null): {
  fields: GcpConnectionFields | null;
  checks: GcpCheck[];
} {
  const obj = readExtra(extra);
  if (!obj.ok) return { fields: null, checks: [obj.check] };
  const e = obj.value;
  const checks: GcpCheck[] = [];

  const set = (['keyfile_dict', 'key_path', 'key_secret_name'] as const)
    .map((source) => ({ source, found: gcpField(e, FIELD_NAMES[source]) }))
    .filter(
      (x): x is { source: Exclude<GcpCredentialSource, 'adc'>; found: Found } => x.found !== null,
    );
  const winner = set[0];
  const source: GcpCredentialSource = winner?.source ?? 'adc';
  checks.push({
    name: 'credential_source',
    ok: true,
    message:
      set.length > 1
        ? `${set.length} credential sources are set (${set.map((s) => s.found.key).join(', ')}); ` +
          `${source} wins, the others are ignored (order: keyfile_dict → key_path → key_secret_name → ADC)`
        : source === 'adc'
          ? 'no key field is set: keyless (Application Default Credentials)'
          : `credentials come from ${winner!.found.key}`,
  });

  const fields: GcpConnectionFields = {
    source,
    project: null,
    scopes: [],
    num_retries: GCP_DEFAULT_NUM_RETRIES,
    keyfile_dict: null,
    key_path: null,
    key_secret_name: null,
  };

  let keyProject: string | null = null;
  if (winner === undefined) {
    checks.push({
      name: 'adc',
      ok: true,
      message:
        'keyless: the task resolves credentials via Application Default Credentials ' +
        '(Workload Identity on GKE, host ADC under Lite); no key is stored in Leoflow',
    });
  } else if (winner.source === 'keyfile_dict') {
    const key = checkKeyfile(winner.found);
    checks.push(key.check);
    fields.keyfile_dict = key.value;
    if (
      key.value !== null &&
      typeof key.value['project_id'] === 'string' &&
      key.value['project_id'] !== ''
    ) {
      keyProject = key.value['project_id'];
    }
  } else if (winner.source === 'key_path') {
    const v = winner.found.value;
    if (typeof v !== 'string') {
      checks.push({
        name: 'key_path',
        ok: false,
        hard: true,
        message: 'key_path must be a string',
      });
    } else {
      fields.key_path = v;
      checks.push(
        /^(\/|[A-Za-z]:[\\/])/.test(v)
          ? {
              name: 'key_path',
              ok: true,
              message: `key_path set — validated at task runtime: ${v} (the control plane does not read it)`,
            }
          : {
              name: 'key_path',
              ok: false,
              message: 'key_path must be an absolute path (e.g. /etc/leoflow/secrets/key.json)',
            },
      );
    }
  } else {
    const v = winner.found.value;
    if (typeof v !== 'string') {
      checks.push({
        name: 'key_secret_name',
        ok: false,
        hard: true,
        message: 'key_secret_name must be a string',
      });
    } else {
      fields.key_secret_name = v;
      checks.push(
        SECRET_NAME.test(v) || GCP_BARE_SECRET_NAME.test(v)
          ? {
              name: 'key_secret_name',
              ok: true,
              message:
                'key_secret_name set — the task fetches the key from Secret Manager with its own ADC identity at runtime' +
                (SECRET_NAME.test(v)
                  ? ''
                  : ", in the ADC project (the secret's name alone, as Airflow reads it)"),
            }
          : {
              name: 'key_secret_name',
              ok: false,
              message:
                'key_secret_name must be a secret name (letters, digits, "_" and "-"; looked up in the ADC project) or a Secret Manager resource name projects/<project>/secrets/<secret>[/versions/<version>] (key_secret_project_id is not supported)',
            },
      );
    }
  }

  // `project` as the provider reads it (short name, then its legacy form) decides first; the
  // `project_id` alias (ours, not the provider's) only fills a project left unset there. As one
  // group, a present-but-empty `project_id` hid a legacy `extra__…__project` the provider uses
  // (found by the Google oracle's differential test, seed 1550840677).
  const project = gcpField(e, ['project']) ?? gcpField(e, ['project_id']);
  if (project === null) {
    fields.project = keyProject;
    checks.push({
      name: 'project',
      ok: true,
      message:
        keyProject !== null
          ? `not set: the key file's project_id is used (${keyProject})`
          : 'not set: the project is detected from the credentials at task runtime',
    });
  } else if (typeof project.value !== 'string') {
    checks.push({
      name: 'project',
      ok: false,
      hard: true,
      message: `${project.key} must be a string`,
    });
  } else {
    fields.project = project.value;
    checks.push({ name: 'project', ok: true, message: `${project.value} (from ${project.key})` });
  }

  const scopes = parseScopes(gcpField(e, ['scopes', 'scope']));
  checks.push(scopes.check);
  fields.scopes = scopes.value;

  const retries = parseNumRetries(gcpField(e, ['num_retries']));
  checks.push(retries.check);
  fields.num_retries = retries.value;

  return { fields, checks };
}

/** Airflow stores extra as JSON text; a check may receive it in that form. */
export function readExtra(
  extra: Record<string, unknown> | string | null,
): { ok: true; value: Record<string, unknown> } | { ok: false; check: GcpCheck } {
  if (extra === null || extra === undefined || extra === '') return { ok: true, value: {} };
  if (isPlainObject(extra)) return { ok: true, value: extra };
  const bad = (problem: string) => ({
    ok: false as const,
    check: { name: 'extra', ok: false, hard: true, message: `invalid Extra JSON: ${problem}` },
  });
  if (typeof extra !== 'string') return bad('extra is neither an object nor a JSON string');
  try {
    const node = parsePyJson(extra);
    if (node.kind !== 'object') return bad('the text is not a JSON object');
    return { ok: true, value: pyJsonToJs(node) as Record<string, unknown> };
  } catch (e) {
    if (e instanceof PyJsonSyntaxError) return bad(`not JSON (${e.message})`);
    if (e instanceof NonFiniteNumberError) return bad('it contains NaN or Infinity');
    throw e;
  }
}

/**
 * Checks that keyfile_dict looks like a service-account key. Only client_email is ever quoted
 * (it names the identity and is no secret, and only when it is shaped like an address); the
 * private key and the rest of the key are never echoed.
 */
function checkKeyfile(found: Found): { check: GcpCheck; value: Record<string, unknown> | null } {
  const name = 'keyfile_dict';
  const fail = (message: string, hard = false) => ({
    check: { name, ok: false, message, ...(hard ? { hard } : {}) },
    value: null,
  });
  let key: Record<string, unknown>;
  if (isPlainObject(found.value)) {
    key = found.value;
  } else if (typeof found.value === 'string') {
    let node;
    try {
      node = parsePyJson(found.value);
    } catch (e) {
      if (e instanceof PyJsonSyntaxError)
        return fail('keyfile_dict is a string but not valid JSON', true);
      throw e;
    }
    if (node.kind !== 'object') return fail('keyfile_dict must be a JSON object', true);
    try {
      key = pyJsonToJs(node) as Record<string, unknown>;
    } catch (e) {
      if (e instanceof NonFiniteNumberError)
        return fail('keyfile_dict contains NaN or Infinity', true);
      throw e;
    }
  } else {
    return fail('keyfile_dict must be an object or a JSON string of one', true);
  }
  // A key pasted into a form often carries "\n" as two characters; the provider turns them into
  // newlines before reading the key. Done on a copy: the connection itself is not changed.
  if (typeof key['private_key'] === 'string' && key['private_key'].includes('\\n')) {
    key = { ...key, private_key: key['private_key'].replace(/\\n/g, '\n') };
  }
  const missing = KEYFILE_REQUIRED.filter((f) => typeof key[f] !== 'string' || key[f] === '');
  if (missing.length === 1) {
    return {
      check: { name, ok: false, message: `keyfile_dict missing required field: ${missing[0]}` },
      value: key,
    };
  }
  if (missing.length > 1) {
    return {
      check: {
        name,
        ok: false,
        message: `keyfile_dict missing required fields: ${missing.join(', ')}`,
      },
      value: key,
    };
  }
  if (key['type'] !== 'service_account') {
    return {
      check: {
        name,
        ok: false,
        message:
          'keyfile_dict type is not "service_account"; only service-account keys are supported',
      },
      value: key,
    };
  }
  if (!PEM_PRIVATE_KEY.test(key['private_key'] as string)) {
    return {
      check: {
        name,
        ok: false,
        message:
          'keyfile_dict private_key is not a PEM private key (-----BEGIN PRIVATE KEY----- … -----END PRIVATE KEY-----, with newlines or \\n pairs)',
      },
      value: key,
    };
  }
  const email = key['client_email'] as string;
  if (!EMAIL.test(email)) {
    return {
      check: { name, ok: false, message: 'keyfile_dict client_email is not an email address' },
      value: key,
    };
  }
  return {
    check: {
      name,
      ok: true,
      message:
        `service-account key looks valid (${email}); keyfile_dict makes Leoflow hold the key — ` +
        'prefer keyless (ADC / Workload Identity) or key_path',
    },
    value: key,
  };
}

/** A list or a comma string; items trimmed, empties dropped. */
function parseScopes(found: Found | null): { check: GcpCheck; value: string[] } {
  const name = 'scopes';
  if (found === null) {
    return {
      check: { name, ok: true, message: "not set: the client library's default scopes" },
      value: [],
    };
  }
  let items: unknown[];
  if (typeof found.value === 'string') items = found.value.split(',');
  else if (Array.isArray(found.value)) items = found.value;
  else {
    return {
      check: {
        name,
        ok: false,
        hard: true,
        message: `${found.key} must be a list of URLs or a comma-separated string`,
      },
      value: [],
    };
  }
  if (!items.every((s): s is string => typeof s === 'string')) {
    return {
      check: {
        name,
        ok: false,
        hard: true,
        message: `every entry of ${found.key} must be a string`,
      },
      value: [],
    };
  }
  const value = items.map((s) => s.trim()).filter((s) => s !== '');
  const bad = value.map((s, i) => (SCOPE_URL.test(s) ? -1 : i + 1)).filter((i) => i > 0);
  if (bad.length > 0) {
    return {
      check: {
        name,
        ok: false,
        message:
          `${found.key}: entr${bad.length === 1 ? 'y' : 'ies'} ${bad.join(', ')} of ${value.length} ` +
          `${bad.length === 1 ? 'is' : 'are'} not a URL (e.g. https://www.googleapis.com/auth/cloud-platform)`,
      },
      value,
    };
  }
  return {
    check: {
      name,
      ok: true,
      message:
        value.length === 0
          ? "empty: the client library's default scopes"
          : `${value.length} scope${value.length === 1 ? '' : 's'} (from ${found.key})`,
    },
    value,
  };
}

/**
 * A non-negative integer, or a string of digits (Airflow's UI stores strings); missing, null, ""
 * or blank is the provider's default, 5.
 */
function parseNumRetries(found: Found | null): { check: GcpCheck; value: number } {
  const name = 'num_retries';
  if (found === null || (typeof found.value === 'string' && found.value.trim() === '')) {
    return {
      check: {
        name,
        ok: true,
        message: `not set: ${GCP_DEFAULT_NUM_RETRIES} (the Google provider's default)`,
      },
      value: GCP_DEFAULT_NUM_RETRIES,
    };
  }
  const v = found.value;
  const n =
    typeof v === 'number'
      ? v
      : typeof v === 'string' && /^\s*[0-9]+\s*$/.test(v)
        ? Number(v.trim())
        : NaN;
  if (!Number.isSafeInteger(n) || n < 0) {
    return {
      check: {
        name,
        ok: false,
        hard: true,
        message: `${found.key} must be a non-negative integer`,
      },
      value: GCP_DEFAULT_NUM_RETRIES,
    };
  }
  return { check: { name, ok: true, message: String(n) }, value: n };
}
