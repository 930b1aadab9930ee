import { randomUUID } from 'node:crypto';
import { AuthError, type Clock } from '@leoflow/core';
import type { RunnerRecord } from '../store/directory-types.js';
import type { RunnerStore } from '../store/ports/runners.js';
import type { Page } from '../store/types.js';
import type { VaultService } from '../vault/vault-service.js';
import { runnerDoorUrl, runnerLaunchCommand } from './launch-command.js';
import { mintRunnerToken, runnerTokenHash } from './runner-token.js';
import { validateRunnerInput, type RunnerInput } from './runner-validation.js';

/** A runner as every reader sees it: never the token, never its hash or ciphertext. */
export interface RunnerView {
  id: string;
  name: string;
  kind: RunnerRecord['kind'];
  labels: Record<string, string>;
  capacity: number;
  ssh: RunnerRecord['ssh'];
  has_token: boolean;
  created_by: string;
  created_at: number;
}

/** What the caller who may read the token gets: the token and what to run with it. */
export interface RunnerTokenView {
  token: string;
  door_url: string | null;
  launch_command: string | null;
}

export interface RunnerRegistryDeps {
  runners: RunnerStore;
  vault: Pick<VaultService, 'sealRunnerToken' | 'openRunnerToken'>;
  /** does the tenant hold this Connection (an ssh runner's credential)? */
  connectionExists: (tenant_id: string, conn_id: string) => Promise<boolean>;
  clock: Clock;
  /** the door's public base URL (`https://door.example`); null: no door configured here */
  doorUrl: string | null;
  /** told after a runner is deleted, so its live sessions close at once */
  onDeleted?: (runner: { id: string; tenant_id: string }) => void;
  /** told after a runner is registered, so an ssh runner is dialed now, not at the next poll */
  onRegistered?: (runner: { id: string; tenant_id: string; kind: RunnerRecord['kind'] }) => void;
}

/** The one place that turns a record into what a reader may see (the token never). */
export function runnerView(r: RunnerRecord): RunnerView {
  return {
    id: r.id,
    name: r.name,
    kind: r.kind,
    labels: { ...r.labels },
    capacity: r.capacity,
    ssh: r.ssh === null ? null : { ...r.ssh },
    has_token: r.token_hash !== null,
    created_by: r.created_by,
    created_at: r.created_at,
  };
}

/**
 * Runner records for one tenant at a time: registration mints an inbound runner's token once
 * (sealed into the directory, looked up by its hash), reads never carry it, and only
 * revealToken — behind runners:create — opens it again. There is no rotation: delete, then
 * register; the delete removes the hash, so the old token stops resolving at once.
 */
export class RunnerRegistry {
  constructor(private readonly deps: RunnerRegistryDeps) {}

  async register(
    tenant_id: string,
    input: RunnerInput,
    created_by: string,
  ): Promise<{ runner: RunnerView; token: RunnerTokenView | null }> {
    const valid = validateRunnerInput(input);
    if (
      valid.ssh !== null &&
      !(await this.deps.connectionExists(tenant_id, valid.ssh.credential))
    ) {
      throw new AuthError(
        'LF_RUNNER_INVALID',
        `ssh credential: no connection ${valid.ssh.credential} in this tenant; create it first (\`leoflow connections set\`)`,
        { field: 'ssh.credential' },
      );
    }
    const id = `rnr_${randomUUID().replace(/-/g, '')}`;
    const token = valid.kind === 'inbound' ? mintRunnerToken() : null;
    const sealed = token === null ? null : this.deps.vault.sealRunnerToken(tenant_id, id, token);
    const record: RunnerRecord = {
      id,
      tenant_id,
      ...valid,
      token_hash: token === null ? null : runnerTokenHash(token),
      token_cipher: sealed?.cipher ?? null,
      token_key_id: sealed?.key_id ?? null,
      created_by,
      created_at: this.deps.clock.now(),
    };
    if (!(await this.deps.runners.insertRunner(record))) {
      throw new AuthError(
        'LF_RUNNER_EXISTS',
        `runner ${valid.name} exists; there is no in-place rotation: delete it, then register again`,
        { name: valid.name },
      );
    }
    this.deps.onRegistered?.({ id: record.id, tenant_id, kind: record.kind });
    return { runner: runnerView(record), token: token === null ? null : this.#tokenView(token) };
  }

  async list(tenant_id: string, page: Page): Promise<RunnerView[]> {
    return (await this.deps.runners.listRunners(tenant_id, page)).map(runnerView);
  }

  async get(tenant_id: string, name: string): Promise<RunnerView> {
    return runnerView(await this.#record(tenant_id, name));
  }

  /** The token again, for a caller holding runners:create (the route checks, and audits). */
  async revealToken(tenant_id: string, name: string): Promise<RunnerTokenView> {
    const r = await this.#record(tenant_id, name);
    if (r.token_cipher === null || r.token_key_id === null) {
      throw new AuthError(
        'LF_RUNNER_NO_TOKEN',
        `runner ${name} is an ssh runner and has no token`,
        {
          name,
        },
      );
    }
    return this.#tokenView(
      this.deps.vault.openRunnerToken(tenant_id, r.id, r.token_cipher, r.token_key_id),
    );
  }

  async delete(tenant_id: string, name: string): Promise<RunnerView> {
    const gone = await this.deps.runners.deleteRunner(tenant_id, name);
    if (!gone) throw notFound(name);
    this.deps.onDeleted?.({ id: gone.id, tenant_id });
    return runnerView(gone);
  }

  async #record(tenant_id: string, name: string): Promise<RunnerRecord> {
    const r = await this.deps.runners.getRunner(tenant_id, name);
    if (!r) throw notFound(name);
    return r;
  }

  #tokenView(token: string): RunnerTokenView {
    const door = this.deps.doorUrl;
    return {
      token,
      door_url: door === null ? null : runnerDoorUrl(door, token),
      launch_command: door === null ? null : runnerLaunchCommand(door, token),
    };
  }
}

function notFound(name: string): AuthError {
  return new AuthError('LF_RUNNER_NOT_FOUND', `no runner ${name} in this tenant`, { name });
}
