import { createPrivateKey } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { GoogleAuth, gaxios, type GoogleAuthOptions, type JWTInput } from 'google-auth-library';
import {
  GCP_BARE_SECRET_NAME,
  GCP_CONN_TYPE,
  LeoflowError,
  normalizeConnType,
  resolveGcpConnectionFields,
  type GcpCredentialSource,
} from '@leoflow/core';
import { getConnection, type Env } from './env.js';

/** Used when the connection names no scopes (Airflow's Google provider does the same). */
export const DEFAULT_GOOGLE_SCOPES: readonly string[] = [
  'https://www.googleapis.com/auth/cloud-platform',
];
export const DEFAULT_SECRET_MANAGER_ENDPOINT = 'https://secretmanager.googleapis.com';
export const SECRET_MANAGER_ENDPOINT_ENV = 'LEOFLOW_SECRET_MANAGER_ENDPOINT';
/** The token endpoint google-auth-library posts service-account assertions to. */
export const GOOGLE_TOKEN_URL = 'https://oauth2.googleapis.com/token';

export interface GoogleAuthOptionsLeoflow {
  /** Where AIRFLOW_CONN_* is read from; defaults to process.env. */
  env?: Env;
  /** Replaces the connection's scopes. */
  scopes?: string[];
  /** Secret Manager base URL (tests); else $LEOFLOW_SECRET_MANAGER_ENDPOINT, else Google's. */
  secretManagerEndpoint?: string;
}

/** The field a key came from, as error messages name it. */
const KEYFILE_DICT_FIELD = 'keyfile_dict';

/** What the connection resolved to. `credentials` is the service-account key: never log it. */
export interface ResolvedGoogleConnection {
  connId: string;
  source: GcpCredentialSource;
  /** Explicit project, else the key's project_id, else null (ADC detects it). */
  projectId: string | null;
  scopes: string[];
  /** The connection's num_retries; 5 when it is missing, null or empty (the provider's default). */
  numRetries: number;
  credentials: JWTInput | null;
}

function gcpError(code: string, message: string): LeoflowError {
  return new LeoflowError(code, message);
}

function parseKey(text: string, where: string): JWTInput {
  let key: unknown;
  try {
    key = JSON.parse(text);
  } catch {
    // Never echo the text: it is (meant to be) a private key.
    throw gcpError('LF_SDK_GCP_KEY_INVALID', `${where} is not a JSON service-account key`);
  }
  if (key === null || typeof key !== 'object' || Array.isArray(key)) {
    throw gcpError('LF_SDK_GCP_KEY_INVALID', `${where} is not a JSON object`);
  }
  return checkKey(key as Record<string, unknown>, where);
}

function checkKey(key: Record<string, unknown>, where: string): JWTInput {
  for (const f of ['client_email', 'private_key'] as const) {
    if (typeof key[f] !== 'string' || key[f] === '') {
      throw gcpError(
        'LF_SDK_GCP_KEY_INVALID',
        `${where} has no ${f}: it is not a service-account key`,
      );
    }
  }
  if (key['type'] !== undefined && key['type'] !== 'service_account') {
    throw gcpError(
      'LF_SDK_GCP_KEY_INVALID',
      `${where} is not a service-account key (type is not "service_account")`,
    );
  }
  // Read the key now, so a bad one fails here naming the field rather than later, inside the
  // token request, as an OpenSSL error (never shown: it may quote key material).
  try {
    createPrivateKey(key['private_key'] as string);
  } catch {
    throw gcpError(
      'LF_SDK_GCP_KEY_INVALID',
      `${where}: private_key cannot be read as a PEM private key. Paste the key file's ` +
        'private_key unchanged (real newlines or \\n pairs, with its BEGIN/END PRIVATE KEY lines)',
    );
  }
  return key;
}

function secretManagerBase(opts: GoogleAuthOptionsLeoflow): string {
  const env = opts.env ?? process.env;
  const base =
    opts.secretManagerEndpoint ??
    env[SECRET_MANAGER_ENDPOINT_ENV] ??
    DEFAULT_SECRET_MANAGER_ENDPOINT;
  return base.replace(/\/+$/, '');
}

/** `projects/p/secrets/s` → `.../versions/latest`; an explicit version is kept. */
export function secretVersionName(name: string): string {
  return /\/versions\/[^/]+$/.test(name) ? name : `${name}/versions/latest`;
}

/**
 * A bare secret name is looked up in the ADC project, as the provider does without
 * key_secret_project_id (which v1 does not support); a missing ADC project is the one error.
 */
async function secretResourceName(name: string, adc: GoogleAuth): Promise<string> {
  if (!GCP_BARE_SECRET_NAME.test(name)) return name;
  let project: string | null = null;
  try {
    project = await adc.getProjectId();
  } catch {
    project = null;
  }
  if (project === null || project === '') {
    throw gcpError(
      'LF_SDK_GCP_SECRET_PROJECT_MISSING',
      `key_secret_name "${name}" is a bare secret name, which is looked up in the project of the ` +
        "task's Application Default Credentials — and ADC has no project. Set GOOGLE_CLOUD_PROJECT " +
        'for the task, or give the full name projects/<project>/secrets/<secret>.',
    );
  }
  return `projects/${project}/secrets/${name}`;
}

async function fetchSecretKey(
  name: string,
  opts: GoogleAuthOptionsLeoflow,
  numRetries: number,
): Promise<JWTInput> {
  // The secret is read with the task's own identity: Application Default Credentials.
  const adc = new GoogleAuth({
    scopes: [...DEFAULT_GOOGLE_SCOPES],
    clientOptions: transporterOptions(null, numRetries),
  });
  const resource = await secretResourceName(name, adc);
  const url = `${secretManagerBase(opts)}/v1/${secretVersionName(resource)}:access`;
  let data: unknown;
  try {
    const res = await adc.request<unknown>({ url, method: 'GET', responseType: 'json' });
    data = res.data;
  } catch (e) {
    const status = (e as { status?: number; response?: { status?: number } }).response?.status;
    throw gcpError(
      'LF_SDK_GCP_SECRET_FETCH_FAILED',
      `could not read key_secret_name from Secret Manager${status !== undefined ? ` (HTTP ${status})` : ''}: ` +
        `${(e as Error).message.split('\n')[0]}. The task's own identity (ADC) needs ` +
        'roles/secretmanager.secretAccessor on the secret.',
    );
  }
  const payload = (data as { payload?: { data?: unknown } } | null)?.payload?.data;
  if (typeof payload !== 'string') {
    throw gcpError(
      'LF_SDK_GCP_SECRET_FETCH_FAILED',
      'Secret Manager answered without payload.data',
    );
  }
  return parseKey(
    Buffer.from(payload, 'base64').toString('utf8'),
    'the secret named by key_secret_name',
  );
}

/**
 * Reads `AIRFLOW_CONN_<ID>` and resolves it the way the task must (ADR 0035): keyfile_dict →
 * key_path → key_secret_name (Secret Manager via ADC) → Application Default Credentials. Field
 * rules (short names first, legacy `extra__google_cloud_platform__*` only as a fallback, scopes
 * as a list or comma string) are the codec's `resolveGcpConnectionFields`.
 */
export async function resolveGoogleConnection(
  connId: string,
  opts: GoogleAuthOptionsLeoflow = {},
): Promise<ResolvedGoogleConnection> {
  const conn = getConnection(connId, opts.env === undefined ? {} : { env: opts.env });
  if (conn.conn_type === null || normalizeConnType(conn.conn_type) !== GCP_CONN_TYPE) {
    throw gcpError(
      'LF_SDK_GCP_CONN_TYPE',
      conn.conn_type === null
        ? `connection "${connId}" has no conn_type; set it to ${GCP_CONN_TYPE}`
        : `connection "${connId}" has conn_type "${conn.conn_type}", not ${GCP_CONN_TYPE}`,
    );
  }
  const fields = resolveGcpConnectionFields(conn.extra);
  let credentials: JWTInput | null = null;
  if (fields.source === 'keyfile_dict' && fields.keyfile_dict !== null) {
    // The codec has already turned literal "\n" pairs in private_key into newlines.
    credentials = checkKey(fields.keyfile_dict, KEYFILE_DICT_FIELD);
  } else if (fields.source === 'key_path' && fields.key_path !== null) {
    let text: string;
    try {
      text = await readFile(fields.key_path, 'utf8');
    } catch (e) {
      throw gcpError(
        'LF_SDK_GCP_KEY_PATH_UNREADABLE',
        `key_path ${fields.key_path} cannot be read (${(e as NodeJS.ErrnoException).code ?? 'error'}); ` +
          'is the Secret mounted into the task (executor task_secret_name)?',
      );
    }
    credentials = parseKey(text, `key_path ${fields.key_path}`);
  } else if (fields.source === 'key_secret_name' && fields.key_secret_name !== null) {
    credentials = await fetchSecretKey(fields.key_secret_name, opts, fields.num_retries);
  }
  const keyProject =
    credentials !== null &&
    typeof credentials.project_id === 'string' &&
    credentials.project_id !== ''
      ? credentials.project_id
      : null;
  return {
    connId,
    source: fields.source,
    projectId: fields.project ?? keyProject,
    scopes: opts.scopes ?? fields.scopes,
    numRetries: fields.num_retries,
    credentials,
  };
}

/**
 * A transport that posts the service-account assertion to the key's `token_uri` (as Google's
 * Python library does; google-auth-library always uses Google's endpoint) and retries
 * `num_retries` times.
 */
function transporterOptions(
  tokenUri: string | null,
  numRetries: number,
): NonNullable<GoogleAuthOptions['clientOptions']> {
  const defaults: gaxios.GaxiosOptions = {
    retry: numRetries > 0,
    retryConfig: { retry: numRetries },
  };
  const transporter = new gaxios.Gaxios(defaults);
  if (tokenUri !== null && tokenUri !== GOOGLE_TOKEN_URL) {
    const target = new URL(tokenUri);
    transporter.interceptors.request.add({
      resolved: (o) => {
        if (String(o.url) === GOOGLE_TOKEN_URL) o.url = new URL(target.href);
        return Promise.resolve(o);
      },
    });
  }
  return { transporter };
}

/**
 * A google-auth-library `GoogleAuth` for connection `connId`, resolved in the task. Use
 * `await auth.getClient()`, `auth.request({ url })`, `auth.getProjectId()`,
 * `auth.getAccessToken()`. The project is the connection's, else the key's, else ADC's.
 */
export async function googleAuth(
  connId: string,
  opts: GoogleAuthOptionsLeoflow = {},
): Promise<GoogleAuth> {
  const r = await resolveGoogleConnection(connId, opts);
  const scopes = r.scopes.length > 0 ? r.scopes : [...DEFAULT_GOOGLE_SCOPES];
  const tokenUri =
    r.credentials !== null &&
    typeof (r.credentials as { token_uri?: unknown }).token_uri === 'string'
      ? (r.credentials as { token_uri: string }).token_uri
      : null;
  const options: GoogleAuthOptions = {
    scopes,
    clientOptions: transporterOptions(tokenUri, r.numRetries),
  };
  if (r.projectId !== null) options.projectId = r.projectId;
  if (r.credentials !== null) options.credentials = r.credentials;
  return new GoogleAuth(options);
}
