import type { SealedValueStore } from '../ports/sealed-values.js';
import type { SealedKind, SealedRef } from '../vault-types.js';
import { changed, toBuffer } from './columns.js';
import { KyselySeam } from './seam.js';

/** Key rotation's view of a cell's sealed variables and connections, on Kysely. */
export class KyselySealedValueStore extends KyselySeam implements SealedValueStore {
  async listSealedNotUnderKey(key_id: string, limit: number): Promise<SealedRef[]> {
    if (limit <= 0) return [];
    const vars = await this.db
      .selectFrom('variables')
      .select(['tenant_id', 'key', 'key_id', 'value_cipher'])
      .where('value_cipher', 'is not', null)
      .where('key_id', '<>', key_id)
      .orderBy('tenant_id')
      .orderBy('key')
      .limit(limit)
      .execute();
    const out: SealedRef[] = [];
    for (const v of vars) {
      if (v.value_cipher === null || v.key_id === null) continue;
      out.push({
        kind: 'variable',
        tenant_id: v.tenant_id,
        id: v.key,
        key_id: v.key_id,
        cipher: new Uint8Array(v.value_cipher),
      });
    }
    const rest = limit - out.length;
    if (rest <= 0) return out;
    const conns = await this.db
      .selectFrom('connections')
      .select(['tenant_id', 'conn_id', 'key_id', 'secret_cipher'])
      .where('secret_cipher', 'is not', null)
      .where('key_id', '<>', key_id)
      .orderBy('tenant_id')
      .orderBy('conn_id')
      .limit(rest)
      .execute();
    for (const c of conns) {
      if (c.secret_cipher === null || c.key_id === null) continue;
      out.push({
        kind: 'connection',
        tenant_id: c.tenant_id,
        id: c.conn_id,
        key_id: c.key_id,
        cipher: new Uint8Array(c.secret_cipher),
      });
    }
    return out;
  }

  async resealValue(
    kind: SealedKind,
    tenant_id: string,
    id: string,
    expect_key_id: string,
    cipher: Uint8Array,
    new_key_id: string,
    _now: number,
  ): Promise<boolean> {
    return this.#reseal(kind, tenant_id, id, expect_key_id, undefined, cipher, new_key_id);
  }

  async resealIfUnchanged(
    ref: SealedRef,
    cipher: Uint8Array,
    new_key_id: string,
    _now: number,
  ): Promise<boolean> {
    return this.#reseal(
      ref.kind,
      ref.tenant_id,
      ref.id,
      ref.key_id,
      ref.cipher,
      cipher,
      new_key_id,
    );
  }

  // updated_at is left alone on purpose: it tells users when a value was last set, and
  // re-encrypting the same value under another key is not that.
  async #reseal(
    kind: SealedKind,
    tenant_id: string,
    id: string,
    expect_key_id: string,
    expect_cipher: Uint8Array | undefined,
    cipher: Uint8Array,
    new_key_id: string,
  ): Promise<boolean> {
    // Runner tokens live in the directory (RunnerTokenSealStore), never in a cell's store.
    if (kind === 'runner_token') return false;
    const next = toBuffer(cipher);
    if (kind === 'variable') {
      let q = this.db
        .updateTable('variables')
        .set({ value_cipher: next, key_id: new_key_id })
        .where('tenant_id', '=', tenant_id)
        .where('key', '=', id)
        .where('key_id', '=', expect_key_id)
        .where('value_cipher', 'is not', null);
      if (expect_cipher !== undefined) q = q.where('value_cipher', '=', toBuffer(expect_cipher));
      return changed((await q.executeTakeFirst()).numUpdatedRows);
    }
    let q = this.db
      .updateTable('connections')
      .set({ secret_cipher: next, key_id: new_key_id })
      .where('tenant_id', '=', tenant_id)
      .where('conn_id', '=', id)
      .where('key_id', '=', expect_key_id)
      .where('secret_cipher', 'is not', null);
    if (expect_cipher !== undefined) q = q.where('secret_cipher', '=', toBuffer(expect_cipher));
    return changed((await q.executeTakeFirst()).numUpdatedRows);
  }

  async countSealedByKeyId(): Promise<Map<string, number>> {
    const counts = new Map<string, number>();
    const add = (rows: { key_id: string | null; n: number | string | bigint }[]) => {
      for (const r of rows) {
        if (r.key_id === null) continue;
        counts.set(r.key_id, (counts.get(r.key_id) ?? 0) + Number(r.n));
      }
    };
    add(
      await this.db
        .selectFrom('variables')
        .select((eb) => ['key_id', eb.fn.countAll<number>().as('n')])
        .where('value_cipher', 'is not', null)
        .groupBy('key_id')
        .execute(),
    );
    add(
      await this.db
        .selectFrom('connections')
        .select((eb) => ['key_id', eb.fn.countAll<number>().as('n')])
        .where('secret_cipher', 'is not', null)
        .groupBy('key_id')
        .execute(),
    );
    return counts;
  }
}
