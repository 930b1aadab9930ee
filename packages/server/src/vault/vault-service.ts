import { grantMatcher, LeoflowError, type Clock, type Connection, VaultError } from '@leoflow/core';
import type { Page } from '../store/types.js';
import type { ConnectionStore } from '../store/ports/connections.js';
import type { RunnerTokenSealStore } from '../store/ports/runner-token-seals.js';
import type { SealedValueStore } from '../store/ports/sealed-values.js';
import type { VariableStore } from '../store/ports/variables.js';
import type {
  ConnectionRecord,
  SealedKind,
  SealedRef,
  VariableRecord,
} from '../store/vault-types.js';
import { systemClock } from '../util/system-clock.js';
import { vaultAad, type Keyring, type Sealed } from './keyring.js';

/** What the vault keeps in the store: the values themselves, and their sealing for rotation. */
export type VaultServiceStore = VariableStore & ConnectionStore & SealedValueStore;

export interface VariableView {
  key: string;
  /** the value; in list results null for secret variables */
  value: string | null;
  is_secret: boolean;
  description: string;
  /** DAG id patterns that may declare it; null: every DAG of the tenant */
  grants: readonly string[] | null;
  created_at: number;
  updated_at: number;
}

export interface ConnectionView {
  id: string;
  conn: Connection;
  description: string;
  /** DAG id patterns that may declare it; null: every DAG of the tenant */
  grants: readonly string[] | null;
  created_at: number;
  updated_at: number;
}

/**
 * Delivery's grant check (issue 34): only values granted to this DAG id are decrypted; the names
 * of the others are pushed to `ungranted` (no value read).
 */
export interface GrantFilter {
  dagId: string;
  ungranted: string[];
}

/** A connection without its secret half (password, extra): what lists may show. */
export interface ConnectionSummary {
  conn_id: string;
  conn_type: string;
  host: string | null;
  login: string | null;
  schema: string | null;
  port: number | null;
  description: string;
  /** a password and/or extra is stored (sealed); known without decrypting */
  has_secret: boolean;
  grants: readonly string[] | null;
  created_at: number;
  updated_at: number;
}

export interface UnreadableValue {
  kind: SealedKind;
  tenant_id: string;
  id: string;
  key_id: string;
  /** LF_SECRET_KEY_MISSING | LF_SECRET_DECRYPT_FAILED */
  code: string;
}

export interface KeyUsage {
  key_id: string;
  /** sealed values (all tenants) under this key, runner tokens in the directory included */
  sealed: number;
  in_keyring: boolean;
  current: boolean;
}

export interface RotateKeysOptions {
  batchSize: number;
  /** after each batch, with the running total re-encrypted by this call */
  onProgress?: (done: number) => void;
  /** stops between two values; call rotateKeys again to finish */
  signal?: AbortSignal;
}

export interface VaultServiceOptions {
  clock?: Clock;
  /**
   * Told about each stored value that delivery skipped because it cannot be decrypted (its
   * key is missing or it was altered). Delivery carries on without it rather than failing
   * every task of the tenant over one bad row.
   */
  onUnreadable?: (v: UnreadableValue) => void;
  /**
   * Called (and awaited) before opening values sealed under key ids this keyring does not hold:
   * another replica may have rotated, and the key is in the shared keyring source but not yet
   * in memory. The callee reloads (VaultKeyringReloader, rate-limited) and replaces the keyring;
   * if the key is still missing afterwards the open fails as before.
   */
  onUnknownKey?: (keyIds: string[]) => Promise<void>;
  /**
   * The directory's inbound runner tokens, which sealRunnerToken seals with this keyring: key
   * rotation re-encrypts and counts them too. Without it (tests of the cell store alone) they
   * are neither rotated nor counted, so a deployment with runners must pass it.
   */
  runnerTokens?: RunnerTokenSealStore;
}

const MAX_NAME = 250;
// Rounds in a row in which not a single value could be re-encrypted before rotation gives up.
const MAX_STALLED_ROUNDS = 20;

/**
 * Variables and Connections over the store, sealing and opening secret material with the
 * keyring. Plaintext exists only in this process's memory between a read and its caller;
 * the store only ever sees ciphertext. Every ciphertext is bound to its row (kind, tenant,
 * name) through the AAD.
 */
export class VaultService {
  readonly #store: VaultServiceStore;
  #keyring: Keyring;
  readonly #clock: Clock;
  readonly #onUnreadable: (v: UnreadableValue) => void;
  readonly #onUnknownKey: ((keyIds: string[]) => Promise<void>) | undefined;
  readonly #runnerTokens: RunnerTokenSealStore | undefined;

  constructor(store: VaultServiceStore, keyring: Keyring, opts: VaultServiceOptions = {}) {
    this.#store = store;
    this.#keyring = keyring;
    this.#clock = opts.clock ?? systemClock;
    this.#onUnreadable = opts.onUnreadable ?? (() => undefined);
    this.#onUnknownKey = opts.onUnknownKey;
    this.#runnerTokens = opts.runnerTokens;
  }

  get currentKeyId(): string {
    return this.#keyring.currentKeyId;
  }

  /** The ids of the keys this process holds (no key material). */
  get keyIds(): string[] {
    return this.#keyring.keyIds();
  }

  /**
   * Online key rotation: new values seal under the new keyring's current key at once, while
   * its older keys keep opening everything sealed before (rotateKeys then re-encrypts those).
   */
  replaceKeyring(keyring: Keyring, dropped: readonly string[] = []): void {
    for (const id of this.#keyring.keyIds()) {
      if (!keyring.has(id) && !dropped.includes(id)) {
        throw new VaultError(
          'LF_SECRET_KEYRING_INVALID',
          `the new keyring lacks key ${id}; keep every older key until rotate-key reports none remaining`,
        );
      }
    }
    this.#keyring = keyring;
  }

  // ---------------------------------------------------------------- variables

  /**
   * Creates or replaces a variable. A secret value is sealed; a plain one is stored as text.
   * Without a description an existing variable keeps its own.
   */
  async setVariable(
    tenant_id: string,
    key: string,
    value: string,
    opts: { secret: boolean; description?: string },
    now: number,
  ): Promise<void> {
    checkName('variable key', key);
    if (typeof value !== 'string') {
      throw new LeoflowError('LF_INVALID_ARGUMENT', `variable ${key}: the value must be a string.`);
    }
    const description =
      opts.description ?? (await this.#store.getVariable(tenant_id, key))?.description ?? '';
    const base = { tenant_id, key, description, created_at: now, updated_at: now };
    if (!opts.secret) {
      await this.#store.putVariable({
        ...base,
        value_text: value,
        value_cipher: null,
        key_id: null,
        is_secret: false,
      });
      return;
    }
    const sealed = this.#keyring.seal(
      Buffer.from(value, 'utf8'),
      vaultAad('variable', tenant_id, key),
    );
    await this.#store.putVariable({
      ...base,
      value_text: null,
      value_cipher: sealed.cipher,
      key_id: sealed.key_id,
      is_secret: true,
    });
  }

  async getVariable(tenant_id: string, key: string): Promise<VariableView | undefined> {
    const rec = await this.#store.getVariable(tenant_id, key);
    if (rec) await this.#ensureKeys([rec.key_id]);
    return rec && { ...variableMeta(rec), value: this.#variableValue(rec) };
  }

  /** Secret variables come back with value null; callers never decrypt a whole page. */
  async listVariables(tenant_id: string, page: Page): Promise<VariableView[]> {
    const recs = await this.#store.listVariables(tenant_id, page);
    return recs.map((r) => ({ ...variableMeta(r), value: r.is_secret ? null : r.value_text }));
  }

  async deleteVariable(tenant_id: string, key: string): Promise<boolean> {
    return this.#store.deleteVariable(tenant_id, key);
  }

  // ---------------------------------------------------------------- connections

  /** Creates or replaces a connection; password and extra are sealed together. */
  async setConnection(
    tenant_id: string,
    id: string,
    conn: Connection,
    description: string,
    now: number,
  ): Promise<void> {
    checkName('connection id', id);
    checkConnection(id, conn);
    const secret = { password: conn.password, extra: conn.extra };
    const sealed =
      secret.password === null && secret.extra === null
        ? null
        : this.#keyring.seal(
            Buffer.from(JSON.stringify(secret), 'utf8'),
            vaultAad('connection', tenant_id, id),
          );
    await this.#store.putConnection({
      tenant_id,
      conn_id: id,
      conn_type: conn.conn_type,
      host: conn.host,
      login: conn.login,
      schema: conn.schema,
      port: conn.port,
      description,
      secret_cipher: sealed?.cipher ?? null,
      key_id: sealed?.key_id ?? null,
      created_at: now,
      updated_at: now,
    });
  }

  async getConnection(tenant_id: string, id: string): Promise<ConnectionView | undefined> {
    const rec = await this.#store.getConnection(tenant_id, id);
    if (rec === undefined) return undefined;
    await this.#ensureKeys([rec.key_id]);
    return {
      id: rec.conn_id,
      conn: this.#connection(rec),
      description: rec.description,
      grants: rec.dag_grants ?? null,
      created_at: rec.created_at,
      updated_at: rec.updated_at,
    };
  }

  /** Metadata only: no password, no extra, nothing decrypted. */
  async listConnections(tenant_id: string, page: Page): Promise<ConnectionSummary[]> {
    const recs = await this.#store.listConnections(tenant_id, page);
    return recs.map((r) => ({
      conn_id: r.conn_id,
      conn_type: r.conn_type,
      host: r.host,
      login: r.login,
      schema: r.schema,
      port: r.port,
      description: r.description,
      has_secret: r.secret_cipher !== null,
      grants: r.dag_grants ?? null,
      created_at: r.created_at,
      updated_at: r.updated_at,
    }));
  }

  async deleteConnection(tenant_id: string, id: string): Promise<boolean> {
    return this.#store.deleteConnection(tenant_id, id);
  }

  // ---------------------------------------------------------------- delivery

  /**
   * Values for delivery to a task. With a list, only those names are read (filtered in the
   * query) and decrypted — an empty list touches nothing. 'all' is the whole tenant vault.
   */
  async resolveVariables(
    tenant_id: string,
    keys: readonly string[] | 'all',
    grants?: GrantFilter,
  ): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    if (keys !== 'all' && keys.length === 0) return out;
    const all =
      keys === 'all'
        ? await this.#store.getAllVariables(tenant_id)
        : await this.#store.getVariablesByKeys(tenant_id, keys);
    const recs = granted(all, (r) => r.key, grants);
    await this.#ensureKeys(recs.map((r) => r.key_id));
    for (const rec of recs) {
      const value = this.#readable(rec.tenant_id, 'variable', rec.key, rec.key_id, () =>
        this.#variableValue(rec),
      );
      if (value !== undefined) out.set(rec.key, value);
    }
    return out;
  }

  async resolveConnections(
    tenant_id: string,
    ids: readonly string[] | 'all',
    grants?: GrantFilter,
  ): Promise<Map<string, Connection>> {
    const out = new Map<string, Connection>();
    if (ids !== 'all' && ids.length === 0) return out;
    const all =
      ids === 'all'
        ? await this.#store.getAllConnections(tenant_id)
        : await this.#store.getConnectionsByIds(tenant_id, ids);
    const recs = granted(all, (r) => r.conn_id, grants);
    await this.#ensureKeys(recs.map((r) => r.key_id));
    for (const rec of recs) {
      const conn = this.#readable(rec.tenant_id, 'connection', rec.conn_id, rec.key_id, () =>
        this.#connection(rec),
      );
      if (conn !== undefined) out.set(rec.conn_id, conn);
    }
    return out;
  }

  // ---------------------------------------------------------------- runner tokens

  /**
   * Seals an inbound runner's token for the directory, bound (AAD) to its tenant and runner id,
   * so a ciphertext copied onto another runner's row does not open.
   */
  sealRunnerToken(tenant_id: string, runner_id: string, token: string): Sealed {
    const plain = Buffer.from(token, 'utf8');
    try {
      return this.#keyring.seal(plain, vaultAad('runner_token', tenant_id, runner_id));
    } finally {
      plain.fill(0);
    }
  }

  /** Opens a token sealed by sealRunnerToken; errors name the key id, never the value. */
  openRunnerToken(
    tenant_id: string,
    runner_id: string,
    cipher: Uint8Array,
    key_id: string,
  ): string {
    const plain = this.#keyring.open(
      cipher,
      key_id,
      vaultAad('runner_token', tenant_id, runner_id),
    );
    try {
      return Buffer.from(plain.buffer, plain.byteOffset, plain.byteLength).toString('utf8');
    } finally {
      plain.fill(0);
    }
  }

  // ---------------------------------------------------------------- key rotation

  /**
   * Re-encrypts every sealed value that is not under the current key, in batches, online:
   * the cell's secret variables and connections, then the directory's runner tokens sealed
   * under a key this keyring holds (another cell's, under a key it never held, are left alone).
   *
   * Each value is replaced with a compare-and-set on its exact old ciphertext, so a value
   * written meanwhile (by anyone, under any key) is never overwritten: the CAS misses and
   * the next batch re-reads the row. Nothing is deleted and the old ciphertext stays until
   * its replacement is committed, so an interruption at any point leaves every value
   * decryptable with the keyring as it is; calling again finishes the job.
   *
   * Old keys must stay in the keyring until `remainingUnderOldKeys()` is 0 with every
   * control-plane process running the new keyring: a process still holding the old keyring
   * keeps sealing new writes under the old key.
   */
  async rotateKeys(opts: RotateKeysOptions): Promise<{ resealed: number }> {
    const batchSize = Math.floor(opts.batchSize);
    if (!(batchSize >= 1)) {
      throw new LeoflowError('LF_INVALID_ARGUMENT', 'rotateKeys: batchSize must be at least 1.');
    }
    let resealed = 0;
    let stalled = 0;
    for (;;) {
      opts.signal?.throwIfAborted();
      // read each round: a keyring reloaded meanwhile moves the target to its current key
      const batch = await this.#listSealedNotUnderKey(this.#keyring.currentKeyId, batchSize);
      if (batch.length === 0) return { resealed };
      let progressed = false;
      for (const ref of batch) {
        opts.signal?.throwIfAborted();
        if (await this.#reseal(ref)) {
          resealed += 1;
          progressed = true;
        }
      }
      opts.onProgress?.(resealed);
      stalled = progressed ? 0 : stalled + 1;
      if (stalled >= MAX_STALLED_ROUNDS) {
        throw new VaultError(
          'LF_SECRET_ROTATION_STALLED',
          `key rotation made no progress in ${MAX_STALLED_ROUNDS} rounds: the same values keep ` +
            'changing under an old key. Make sure every control-plane process runs with the new ' +
            'keyring, then run the rotation again; nothing was lost.',
        );
      }
    }
  }

  /** Sealed values (all tenants, runner tokens included) not yet under the current key. */
  async remainingUnderOldKeys(): Promise<number> {
    let n = 0;
    for (const [key_id, count] of await this.#countSealedByKeyId()) {
      if (key_id !== this.#keyring.currentKeyId) n += count;
    }
    return n;
  }

  /**
   * Per key id: how many values it seals and whether the keyring holds it. A key id with
   * values but not in the keyring means those values cannot be read (doctor shows this).
   */
  async keyUsage(): Promise<KeyUsage[]> {
    const counts = await this.#countSealedByKeyId();
    const ids = new Set([...this.#keyring.keyIds(), ...counts.keys()]);
    return [...ids].map((key_id) => ({
      key_id,
      sealed: counts.get(key_id) ?? 0,
      in_keyring: this.#keyring.has(key_id),
      current: key_id === this.#keyring.currentKeyId,
    }));
  }

  async #reseal(ref: SealedRef): Promise<boolean> {
    await this.#ensureKeys([ref.key_id]);
    const aad = vaultAad(ref.kind, ref.tenant_id, ref.id);
    // Errors propagate: a value that cannot be opened is left exactly as it is, and the
    // error names the key id it needs.
    const plain = this.#keyring.open(ref.cipher, ref.key_id, aad);
    try {
      // Stored under the key that sealed it, which is `current` unless the keyring was replaced
      // (a reload) while this rotation ran: the row must name the key that opens it.
      const sealed = this.#keyring.seal(plain, aad);
      if (ref.kind === 'runner_token') {
        return (
          (await this.#runnerTokens?.resealRunnerTokenIfUnchanged(
            ref,
            sealed.cipher,
            sealed.key_id,
          )) ?? false
        );
      }
      return await this.#store.resealIfUnchanged(
        ref,
        sealed.cipher,
        sealed.key_id,
        this.#clock.now(),
      );
    } finally {
      plain.fill(0);
    }
  }

  /** A batch: the cell's values first, then (if room is left) the directory's runner tokens. */
  async #listSealedNotUnderKey(current: string, limit: number): Promise<SealedRef[]> {
    const out = await this.#store.listSealedNotUnderKey(current, limit);
    const rest = limit - out.length;
    if (rest <= 0 || this.#runnerTokens === undefined) return out;
    const tokens = await this.#runnerTokens.listRunnerTokensNotUnderKey(
      current,
      this.#keyring.keyIds(),
      rest,
    );
    return [...out, ...tokens];
  }

  /** Per key id, the cell's sealed values plus the runner tokens under keys this ring holds. */
  async #countSealedByKeyId(): Promise<Map<string, number>> {
    const counts = await this.#store.countSealedByKeyId();
    if (this.#runnerTokens === undefined) return counts;
    const merged = new Map(counts);
    for (const [key_id, n] of await this.#runnerTokens.countRunnerTokensByKeyId(
      this.#keyring.keyIds(),
    )) {
      merged.set(key_id, (merged.get(key_id) ?? 0) + n);
    }
    return merged;
  }

  // ---------------------------------------------------------------- helpers

  /** One reload (through onUnknownKey) when a value needs a key id this keyring lacks. */
  async #ensureKeys(keyIds: readonly (string | null)[]): Promise<void> {
    if (this.#onUnknownKey === undefined) return;
    const missing = [...new Set(keyIds)].filter(
      (id): id is string => id !== null && !this.#keyring.has(id),
    );
    if (missing.length === 0) return;
    try {
      await this.#onUnknownKey(missing);
    } catch {
      // The reloader reports its own failures; the open below then fails with the key id.
    }
  }

  #variableValue(rec: VariableRecord): string {
    if (!rec.is_secret) return rec.value_text ?? '';
    if (rec.value_cipher === null || rec.key_id === null) throw corrupt('variable', rec.key);
    const plain = this.#keyring.open(
      rec.value_cipher,
      rec.key_id,
      vaultAad('variable', rec.tenant_id, rec.key),
    );
    try {
      return Buffer.from(plain.buffer, plain.byteOffset, plain.byteLength).toString('utf8');
    } finally {
      plain.fill(0);
    }
  }

  #connection(rec: ConnectionRecord): Connection {
    let password: string | null = null;
    let extra: Record<string, unknown> | null = null;
    if (rec.secret_cipher !== null) {
      if (rec.key_id === null) throw corrupt('connection', rec.conn_id);
      const plain = this.#keyring.open(
        rec.secret_cipher,
        rec.key_id,
        vaultAad('connection', rec.tenant_id, rec.conn_id),
      );
      const parsed = parseSecretHalf(plain);
      if (parsed === undefined) throw corrupt('connection', rec.conn_id);
      ({ password, extra } = parsed);
    }
    return {
      conn_type: rec.conn_type,
      host: rec.host,
      login: rec.login,
      password,
      schema: rec.schema,
      port: rec.port,
      extra,
    };
  }

  #readable<T>(
    tenant_id: string,
    kind: SealedKind,
    id: string,
    key_id: string | null,
    read: () => T,
  ): T | undefined {
    try {
      return read();
    } catch (err) {
      if (
        !(err instanceof LeoflowError) ||
        (err.code !== 'LF_SECRET_KEY_MISSING' && err.code !== 'LF_SECRET_DECRYPT_FAILED')
      ) {
        throw err;
      }
      this.#onUnreadable({ kind, tenant_id, id, key_id: key_id ?? '', code: err.code });
      return undefined;
    }
  }
}

/** The records granted to the filter's DAG id (all without a filter); the others' names noted. */
function granted<R extends { dag_grants?: readonly string[] | null }>(
  recs: R[],
  nameOf: (r: R) => string,
  filter: GrantFilter | undefined,
): R[] {
  if (filter === undefined) return recs;
  const out: R[] = [];
  for (const r of recs) {
    if (r.dag_grants == null || grantMatcher(r.dag_grants)(filter.dagId)) out.push(r);
    else filter.ungranted.push(nameOf(r));
  }
  return out;
}

function variableMeta(rec: VariableRecord): Omit<VariableView, 'value'> {
  return {
    key: rec.key,
    is_secret: rec.is_secret,
    description: rec.description,
    grants: rec.dag_grants ?? null,
    created_at: rec.created_at,
    updated_at: rec.updated_at,
  };
}

function parseSecretHalf(
  plain: Uint8Array,
): { password: string | null; extra: Record<string, unknown> | null } | undefined {
  let json: unknown;
  try {
    json = JSON.parse(
      Buffer.from(plain.buffer, plain.byteOffset, plain.byteLength).toString('utf8'),
    );
  } catch {
    return undefined;
  } finally {
    plain.fill(0);
  }
  if (typeof json !== 'object' || json === null) return undefined;
  const { password, extra } = json as { password?: unknown; extra?: unknown };
  if (password !== null && typeof password !== 'string') return undefined;
  if (extra !== null && (typeof extra !== 'object' || Array.isArray(extra))) return undefined;
  return { password, extra: extra as Record<string, unknown> | null };
}

function checkName(what: string, name: string): void {
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_NAME) {
    throw new LeoflowError('LF_INVALID_ARGUMENT', `${what} must be 1-${MAX_NAME} characters long.`);
  }
  if (name.includes('\0'))
    throw new LeoflowError('LF_INVALID_ARGUMENT', `${what} cannot contain NUL.`);
}

function checkConnection(id: string, conn: Connection): void {
  const bad = (why: string) => new LeoflowError('LF_INVALID_ARGUMENT', `connection ${id}: ${why}.`);
  if (typeof conn.conn_type !== 'string' || conn.conn_type === '')
    throw bad('conn_type is required');
  for (const field of ['host', 'login', 'schema', 'password'] as const) {
    const v = conn[field];
    if (v !== null && typeof v !== 'string') throw bad(`${field} must be a string or null`);
  }
  if (
    conn.port !== null &&
    !(Number.isInteger(conn.port) && conn.port >= 0 && conn.port <= 65535)
  ) {
    throw bad('port must be an integer from 0 to 65535, or null');
  }
  if (conn.extra !== null && (typeof conn.extra !== 'object' || Array.isArray(conn.extra))) {
    throw bad('extra must be a JSON object or null');
  }
}

/** A row the store's constraints should have made impossible; names the row, not the value. */
function corrupt(kind: SealedKind, id: string): LeoflowError {
  return new VaultError(
    'LF_SECRET_DECRYPT_FAILED',
    `stored ${kind} ${id} is malformed; set it again.`,
  );
}
