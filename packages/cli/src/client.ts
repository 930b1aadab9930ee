import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: 1 | 2 = 1,
    readonly code = 'LF_CLI',
  ) {
    super(message);
  }
}

/** Where the URL came from: --url, LEOFLOW_URL, the selected profile, or the built-in default. */
export type UrlSource = 'flag' | 'env' | 'profile' | 'default';
/** Where the token came from; 'file' is the admin token a local standalone wrote. */
export type TokenSource = 'flag' | 'env' | 'profile' | 'file' | 'none';

export interface ClientOptions {
  url?: string;
  token?: string;
  dataDir?: string;
  /** The profile in use (see global-options.ts), for error messages that say what to fix. */
  profile?: string;
  configFile?: string;
  urlSource?: UrlSource;
  tokenSource?: TokenSource;
}

export const DEFAULT_URL = 'http://127.0.0.1:8080';

/** The error code under a failed fetch (undici puts the socket error in `cause`). */
function causeCode(err: unknown): string | undefined {
  let e: unknown = err;
  for (let i = 0; i < 4 && e && typeof e === 'object'; i++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

const CONNECT_FAILURES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ETIMEDOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'ERR_INVALID_URL',
]);

/** True when the request never reached a server (nothing listening, no route, no name). */
function isConnectFailure(err: unknown): boolean {
  const code = causeCode(err);
  return code === undefined || CONNECT_FAILURES.has(code);
}

/**
 * What becomes of the admin token a local standalone wrote (`<data dir>/admin.token`) when no
 * token was given (--token, LEOFLOW_TOKEN, a profile's token):
 * - `send`: the URL is loopback, i.e. this machine's standalone — the token is sent;
 * - `withhold`: a profile names another machine — no token, the server's 401 says what to do;
 * - `refuse`: --url / LEOFLOW_URL names another machine and the file exists — the request is
 *   refused before any network I/O, because the user evidently expects to be authenticated and
 *   the only token at hand is this machine's admin credential.
 * With no file there is nothing to leak: `withhold` (the request goes out without a token).
 */
export type LocalAdminTokenDecision = 'send' | 'withhold' | 'refuse';

export function localAdminTokenDecision(
  url: string,
  urlSource: UrlSource,
  fileExists: boolean,
): LocalAdminTokenDecision {
  if (isLoopback(url)) return 'send';
  if (!fileExists || urlSource === 'profile') return 'withhold';
  return 'refuse';
}

/**
 * Thin REST client. URL order: --url, LEOFLOW_URL, the selected profile's url, then
 * http://127.0.0.1:8080. Token order: --token, LEOFLOW_TOKEN, the profile's token, then the admin
 * token a local standalone wrote to its data directory (so `npm start` + `leoflow …` works with no
 * setup) — the last only for a loopback URL (localAdminTokenDecision). globalOpts() resolves the
 * flags, environment and profile; this class adds the defaults.
 */
export class ApiClient {
  readonly baseUrl: string;
  private readonly token: string | undefined;
  readonly urlSource: UrlSource;
  readonly tokenSource: TokenSource;
  /** Set when the request must not go out at all (see localAdminTokenDecision). */
  private readonly refusal: string | undefined;

  constructor(private readonly opts: ClientOptions) {
    const envUrl = process.env.LEOFLOW_URL || undefined;
    this.baseUrl = (opts.url ?? envUrl ?? DEFAULT_URL).replace(/\/+$/, '');
    this.urlSource =
      opts.urlSource ?? (opts.url !== undefined ? 'flag' : envUrl ? 'env' : 'default');
    const envToken = process.env.LEOFLOW_TOKEN || undefined;
    if (opts.token !== undefined) {
      this.token = opts.token;
      this.tokenSource = opts.tokenSource ?? 'flag';
    } else if (envToken) {
      this.token = envToken;
      this.tokenSource = 'env';
    } else {
      const file = localAdminTokenFile(opts.dataDir);
      const decision = localAdminTokenDecision(this.baseUrl, this.urlSource, existsSync(file));
      // Another machine never gets this machine's standalone admin token.
      this.token = decision === 'send' ? readLocalAdminToken(opts.dataDir) : undefined;
      this.tokenSource = this.token ? 'file' : 'none';
      if (decision === 'refuse') this.refusal = this.withheldTokenMessage(file);
    }
  }

  private withheldTokenMessage(file: string): string {
    const where =
      this.urlSource === 'flag' ? '--url' : this.urlSource === 'env' ? 'LEOFLOW_URL' : 'the URL';
    return (
      `not sending the local standalone's admin token (${file}) to ${this.baseUrl} (from ${where}): ` +
      'that is not a loopback address (127.0.0.0/8, ::1, localhost), and the file holds the admin ' +
      "credential of this machine's standalone, which no other server may see. Nothing was sent. " +
      `Pass a token for that server: --token <token>, LEOFLOW_TOKEN=<token>, or a profile ` +
      '(`leoflow config set-profile <name> --url <url> --token-file <file>`, then --profile <name>)'
    );
  }

  /**
   * Every item of a paginated list route (`{ <key>: [...], next_offset }`), page after page, so a
   * tenant with more than one page of DAGs, Variables or tokens is never silently cut short.
   */
  async listAll<T>(path: string, key: string, pageSize = 1000): Promise<T[]> {
    const items: T[] = [];
    const sep = path.includes('?') ? '&' : '?';
    let offset: number | null = 0;
    while (offset !== null) {
      const page: Record<string, unknown> = await this.request<Record<string, unknown>>(
        'GET',
        `${path}${sep}limit=${pageSize}&offset=${offset}`,
      );
      const batch = (page[key] as T[] | undefined) ?? [];
      items.push(...batch);
      const next = page.next_offset;
      offset = typeof next === 'number' && batch.length > 0 ? next : null;
    }
    return items;
  }

  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    if (this.refusal !== undefined) throw new CliError(this.refusal, 1, 'LF_CLI_TOKEN_WITHHELD');
    let res: Response;
    try {
      res = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers: {
          ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
    } catch (err) {
      // Never reached the server vs. reached it and had the connection cut mid-request (a server
      // that refuses an oversized body closes the connection before reading it all).
      if (isConnectFailure(err)) throw new CliError(this.unreachableMessage(), 1, 'LF_UNREACHABLE');
      throw new CliError(
        `${this.baseUrl} closed the connection during ${method} ${path} (${causeCode(err) ?? 'connection reset'}); ` +
          'the server is reachable but did not answer this request — a body over its size limit is refused this way',
        1,
        'LF_CONNECTION_CLOSED',
      );
    }
    const text = await res.text();
    let parsed: unknown = undefined;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    if (!res.ok) {
      const err = parsed as { code?: string; message?: string } | undefined;
      const code = err?.code ?? `HTTP_${res.status}`;
      const message = err?.message ?? `${method} ${path} failed with HTTP ${res.status}`;
      if (res.status === 413) {
        throw new CliError(`refused by the server (413 ${code}): ${message}`, 1, code);
      }
      throw new CliError(
        res.status === 401 ? this.unauthenticatedMessage(message) : message,
        1,
        code,
      );
    }
    return parsed as T;
  }

  private profileRef(): string {
    const where = this.opts.configFile ? ` in ${this.opts.configFile}` : '';
    return `profile "${this.opts.profile ?? '?'}"${where}`;
  }

  private unreachableMessage(): string {
    if (this.urlSource === 'profile') {
      return (
        `cannot reach ${this.baseUrl} (the url of ${this.profileRef()}) — is the server running there? ` +
        `change it with \`leoflow config set-profile ${this.opts.profile ?? '<name>'} --url <url>\`, ` +
        'or pass --url / set LEOFLOW_URL for one command'
      );
    }
    return `cannot reach ${this.baseUrl} — is \`leoflow standalone\` running? set LEOFLOW_URL or pass --url`;
  }

  /** The server's 401 text knows nothing of where our token came from; say which one was refused. */
  private unauthenticatedMessage(serverMessage: string): string {
    const name = this.opts.profile ?? '<name>';
    switch (this.tokenSource) {
      case 'profile':
        return (
          `${this.baseUrl} refused the token of ${this.profileRef()} (invalid, expired, revoked or for ` +
          `another server); store the right one with \`leoflow config set-profile ${name} --token-file <file>\``
        );
      case 'flag':
        return `${this.baseUrl} refused the token given with --token (invalid, expired, revoked or for another server)`;
      case 'env':
        return `${this.baseUrl} refused the token in LEOFLOW_TOKEN (invalid, expired, revoked or for another server); unset it or set the right one`;
      case 'file':
        return (
          `${this.baseUrl} refused the admin token in ${localAdminTokenFile(this.opts.dataDir)} ` +
          '(it belongs to another standalone?); pass --token, set LEOFLOW_TOKEN or use a profile with a token'
        );
      case 'none':
        return this.urlSource === 'profile'
          ? `${serverMessage}; or store one in the profile with \`leoflow config set-profile ${name} --token-file <file>\``
          : serverMessage;
    }
  }
}

/** 127.0.0.0/8, ::1 and localhost: where a local standalone's admin token may be sent. */
export function isLoopback(url: string): boolean {
  let host: string;
  try {
    host = new URL(url).hostname;
  } catch {
    return false;
  }
  return host === 'localhost' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

function localAdminTokenFile(dataDir?: string): string {
  return join(resolve(dataDir ?? process.env.LEOFLOW_DATA_DIR ?? '.leoflow'), 'admin.token');
}

function readLocalAdminToken(dataDir?: string): string | undefined {
  const file = localAdminTokenFile(dataDir);
  if (!existsSync(file)) return undefined;
  try {
    return readFileSync(file, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}
