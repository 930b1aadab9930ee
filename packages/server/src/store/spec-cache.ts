import type { DagSpec } from '@leoflow/core';
import { DagError } from '@leoflow/core';
import type { DagStore } from './ports/dags.js';

/** DAG versions are immutable once written, so their parsed specs can be cached forever. */
export class SpecCache {
  private readonly specs = new Map<string, DagSpec>();

  constructor(private readonly store: DagStore) {}

  async get(tenantId: string, dagId: string, version: number): Promise<DagSpec> {
    const key = `${tenantId}\u0000${dagId}\u0000${version}`;
    const hit = this.specs.get(key);
    if (hit) return hit;
    const row = await this.store.getDagVersion(tenantId, dagId, version);
    if (!row) {
      throw new DagError(
        'LF_DAG_VERSION_NOT_FOUND',
        `DAG ${dagId} has no version ${version}; push it again with \`leoflow dags push\``,
      );
    }
    this.specs.set(key, row.spec);
    return row.spec;
  }
}
