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

export interface ClientOptions {
  url?: string;
  token?: string;
  dataDir?: string;
}

export const DEFAULT_URL = 'http://127.0.0.1:8080';

/**
 * Thin REST client. Token order: --token, LEOFLOW_TOKEN, then the admin token a local
 * standalone wrote to its data directory (so `npm start` + `leoflow …` works with no setup).
 */
export class ApiClient {
  readonly baseUrl: string;
  private readonly token: string | undefined;

  constructor(opts: ClientOptions) {
    this.baseUrl = (opts.url ?? process.env.LEOFLOW_URL ?? DEFAULT_URL).replace(/\/+$/, '');
    this.token = opts.token ?? process.env.LEOFLOW_TOKEN ?? readLocalAdminToken(opts.dataDir);
  }

  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
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
    } catch {
      throw new CliError(
        `cannot reach ${this.baseUrl} — is \`leoflow standalone\` running? set LEOFLOW_URL or pass --url`,
        1,
        'LF_UNREACHABLE',
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
      throw new CliError(
        err?.message ?? `${method} ${path} failed with HTTP ${res.status}`,
        1,
        err?.code ?? `HTTP_${res.status}`,
      );
    }
    return parsed as T;
  }
}

function readLocalAdminToken(dataDir?: string): string | undefined {
  const dir = resolve(dataDir ?? process.env.LEOFLOW_DATA_DIR ?? '.leoflow');
  const file = join(dir, 'admin.token');
  if (!existsSync(file)) return undefined;
  try {
    return readFileSync(file, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}
