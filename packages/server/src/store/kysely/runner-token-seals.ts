import type { RunnerTokenSealStore } from '../ports/runner-token-seals.js';
import type { SealedRef } from '../vault-types.js';
import { changed, toBuffer } from './columns.js';
import { KyselySeam } from './seam.js';

/** Key rotation's view of inbound runners' sealed tokens in the directory, on Kysely. */
export class KyselyRunnerTokenSealStore extends KyselySeam implements RunnerTokenSealStore {
  async listRunnerTokensNotUnderKey(
    key_id: string,
    among: readonly string[],
    limit: number,
  ): Promise<SealedRef[]> {
    const ids = among.filter((id) => id !== key_id);
    if (limit <= 0 || ids.length === 0) return [];
    const rows = await this.db
      .selectFrom('runners')
      .select(['id', 'tenant_id', 'token_key_id', 'token_cipher'])
      .where('token_cipher', 'is not', null)
      .where('token_key_id', 'in', ids)
      .orderBy('id')
      .limit(limit)
      .execute();
    const out: SealedRef[] = [];
    for (const r of rows) {
      if (r.token_cipher === null || r.token_key_id === null) continue;
      out.push({
        kind: 'runner_token',
        tenant_id: r.tenant_id,
        id: r.id,
        key_id: r.token_key_id,
        cipher: new Uint8Array(r.token_cipher),
      });
    }
    return out;
  }

  async resealRunnerTokenIfUnchanged(
    ref: SealedRef,
    cipher: Uint8Array,
    new_key_id: string,
  ): Promise<boolean> {
    if (ref.kind !== 'runner_token') return false;
    const res = await this.db
      .updateTable('runners')
      .set({ token_cipher: toBuffer(cipher), token_key_id: new_key_id })
      .where('id', '=', ref.id)
      .where('tenant_id', '=', ref.tenant_id)
      .where('token_key_id', '=', ref.key_id)
      .where('token_cipher', '=', toBuffer(ref.cipher))
      .executeTakeFirst();
    return changed(res.numUpdatedRows);
  }

  async countRunnerTokensByKeyId(among: readonly string[]): Promise<Map<string, number>> {
    const counts = new Map<string, number>();
    if (among.length === 0) return counts;
    const rows = await this.db
      .selectFrom('runners')
      .select((eb) => ['token_key_id', eb.fn.countAll<number>().as('n')])
      .where('token_cipher', 'is not', null)
      .where('token_key_id', 'in', [...among])
      .groupBy('token_key_id')
      .execute();
    for (const r of rows) {
      if (r.token_key_id !== null) counts.set(r.token_key_id, Number(r.n));
    }
    return counts;
  }
}
