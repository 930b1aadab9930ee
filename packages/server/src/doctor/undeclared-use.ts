import type { UndeclaredUseSummary } from '../store/types.js';
import type { SectionContext } from './findings.js';

/**
 * Doctor section: secrets read at run time without a declaration (D5). Per DAG, the Variable
 * and Connection names tasks read through the SDK that its leoflow.yaml did not declare — what
 * secret_scoping=enforce would withhold. Reported only when the datastore is fully migrated.
 */
export async function undeclaredSecretUse(
  ctx: Pick<SectionContext, 'cfg' | 'check'>,
  read: (tenantId: string) => Promise<UndeclaredUseSummary[]>,
): Promise<void> {
  const { cfg, check } = ctx;
  const dags = await read(cfg.tenantId);
  if (dags.length === 0) {
    check(
      'secrets.undeclared_use',
      'ok',
      'no task has read (through the SDK) a Variable or Connection its DAG did not declare',
    );
  } else {
    const list = dags
      .map(
        (d) =>
          `${d.dag_id} (${[
            d.variables.length > 0 ? `variables ${d.variables.join(', ')}` : '',
            d.connections.length > 0 ? `connections ${d.connections.join(', ')}` : '',
          ]
            .filter((x) => x !== '')
            .join('; ')})`,
      )
      .join(', ');
    check(
      'secrets.undeclared_use',
      'warn',
      `tasks read names their DAG did not declare — secret_scoping=enforce would withhold them: ${list}. Declare them in leoflow.yaml (variables:/connections:) before switching; details: GET /api/v1/secrets/undeclared-use`,
    );
  }
}
