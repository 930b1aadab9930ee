import { readFileSync, writeFileSync } from 'node:fs';
import type { Client } from '@connectrpc/connect';
import { codeName, retryUntil } from './retry.js';
import {
  AGENT_PROTOCOL_VERSION,
  AgentService,
  BootstrapCredentialKind,
  LeoflowTokenScope,
} from '@leoflow/protocol';

/** Set by the exchange transport: where the projected service-account token is (a path). */
export const EXCHANGE_TOKEN_FILE_ENV = 'LEOFLOW_EXCHANGE_TOKEN_FILE';
/**
 * Set under auth.exchange_bootstrap=secret_key_ref: the pod's per-attempt bootstrap value, put in
 * the agent's env by the kubelet from the pod's own Secret (valueFrom.secretKeyRef).
 */
export const EXCHANGE_BOOTSTRAP_ENV = 'LEOFLOW_EXCHANGE_BOOTSTRAP';
/** Where the container's termination message goes (the pod's terminationMessagePath). */
export const TERMINATION_LOG_ENV = 'LEOFLOW_TERMINATION_LOG';
export const DEFAULT_TERMINATION_LOG = '/dev/termination-log';

export class ExchangeBootstrapError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ExchangeBootstrapError';
  }
}

export interface ExchangeBootstrapOptions {
  /** an AgentService client whose interceptors add no bearer to ExchangeToken (rpc.ts) */
  client: Pick<Client<typeof AgentService>, 'exchangeToken'>;
  /** the projected token's file, or the SecretKeyRef fallback's value (taken from the env) */
  bootstrap: { tokenFile: string } | { secretValue: string };
  /** the scope the caller is for: an attempt pod's agent, or a warm pool's worker */
  expectScope: 'attempt' | 'worker';
  timeoutMs?: number;
  /**
   * Epoch ms until which an answer that may change (Unavailable: the control plane could not ask
   * the apiserver, or could not be reached) is asked again; default: no retry.
   */
  retryUntil?: number;
  /** the retry's log line (code name and wait only) */
  onRetry?: (code: string, waitMs: number) => void;
}

export interface ExchangedToken {
  token: string;
  scope: 'attempt' | 'worker';
  expiresAtMs: number;
}

/** The projected token, read fresh (the kubelet rotates it); missing or empty is a clear error. */
export function readBootstrapCredential(file: string): string {
  let raw: string;
  try {
    raw = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    throw new ExchangeBootstrapError(
      `the projected service-account token ${file} could not be read (${typeof code === 'string' ? code : 'error'}): the pod needs the exchange token volume (auth.agent_token_transport=exchange)`,
    );
  }
  const token = raw.trim();
  if (token === '') {
    throw new ExchangeBootstrapError(
      `the projected service-account token ${file} is empty: the kubelet has not projected it`,
    );
  }
  return token;
}

/**
 * The exchange, the pod's first call: its projected service-account token (or, under the
 * SecretKeyRef fallback, its bootstrap Secret's value) for a Leoflow token.
 * The attempt agent uses the attempt token exactly as the envvar transport's; a warm-pool worker
 * asks for scope 'worker'. A refusal is final (a pod exchanges once): no retry. An answer that
 * may change — Unavailable, or no answer at all — is asked again until `retryUntil`: the control
 * plane keeps a credential it could not verify unused (and answers a retry that overtakes the
 * first try Unavailable), so the retry is not a replay. A success whose answer was lost is the
 * exception: its retry is refused as a replay, and the pod fails closed.
 */
export async function exchangeBootstrapCredential(
  opts: ExchangeBootstrapOptions,
): Promise<ExchangedToken> {
  const fromSecret = 'secretValue' in opts.bootstrap;
  const credential =
    'secretValue' in opts.bootstrap
      ? opts.bootstrap.secretValue.trim()
      : readBootstrapCredential(opts.bootstrap.tokenFile);
  if (credential === '') {
    throw new ExchangeBootstrapError(
      `${EXCHANGE_BOOTSTRAP_ENV} is empty: the pod's bootstrap Secret holds no value (auth.exchange_bootstrap=secret_key_ref)`,
    );
  }
  let res;
  try {
    const call = () =>
      opts.client.exchangeToken(
        {
          kind: fromSecret
            ? BootstrapCredentialKind.BOOTSTRAP_SECRET
            : BootstrapCredentialKind.PROJECTED_SERVICE_ACCOUNT_TOKEN,
          credential,
          protocolVersion: AGENT_PROTOCOL_VERSION,
        },
        { timeoutMs: opts.timeoutMs ?? 10_000 },
      );
    res = await retryUntil(call, {
      deadline: opts.retryUntil ?? 0,
      backoff: (attempt) => Math.min(250 * 2 ** attempt, 5_000),
      onRetry: (err, _attempt, waitMs) => opts.onRetry?.(codeName(err), waitMs),
    });
  } catch (err) {
    // The server's text is already sanitised; the credential is never part of it.
    throw new ExchangeBootstrapError(
      `the token exchange was refused: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  const scope =
    res.scope === LeoflowTokenScope.ATTEMPT
      ? 'attempt'
      : res.scope === LeoflowTokenScope.WORKER
        ? 'worker'
        : undefined;
  if (scope !== opts.expectScope || res.token === '') {
    throw new ExchangeBootstrapError(
      `the token exchange answered a ${scope ?? 'unknown'}-scoped token; this process needs a ${opts.expectScope} token`,
    );
  }
  return { token: res.token, scope, expiresAtMs: Number(res.expiresAtMs) };
}

/** Best effort: the reason a pod failed, where `kubectl describe pod` shows it. */
export function writeTerminationLog(
  env: Record<string, string | undefined>,
  message: string,
): void {
  try {
    writeFileSync(env[TERMINATION_LOG_ENV] || DEFAULT_TERMINATION_LOG, `${message}\n`);
  } catch {
    // no termination log outside a pod
  }
}
