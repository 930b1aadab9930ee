import { Code, ConnectError } from '@connectrpc/connect';
import { isActive } from '@leoflow/core';
import type { AgentTokenClaims } from '../../auth/agent-token.js';
import type { TaskInstanceStore } from '../../store/ports/task-instances.js';

/**
 * The FENCE of the agent service's writes, whatever the liveness mode (docs/credentials.md,
 * "Which RPC checks what"): which try of a task instance a write may land for.
 */
export class AttemptFences {
  constructor(private readonly store: Pick<TaskInstanceStore, 'getAttemptFence'>) {}

  private async own(claims: AgentTokenClaims) {
    const fence = await this.store.getAttemptFence(claims.task_instance_id);
    // The map index is part of the attempt's identity (issue 41): a row that is not the token's
    // map index is not its task instance.
    return fence && fence.tenant_id === claims.tenant_id && fence.map_index === claims.map_index
      ? fence
      : undefined;
  }

  /** Writes keyed without the try: only the live try of the task instance. */
  async live(claims: AgentTokenClaims) {
    const ti = await this.own(claims);
    if (
      !ti ||
      ti.try_number !== claims.try_number ||
      ti.dispatch_gen !== claims.dispatch_gen ||
      !isActive(ti.state)
    ) {
      throw new ConnectError(
        'this attempt is no longer the live try of its task instance; its write was not applied',
        Code.FailedPrecondition,
      );
    }
    return ti;
  }

  /** Writes keyed with the try: refuses only a try that a later one superseded. */
  async notSuperseded(claims: AgentTokenClaims) {
    const ti = await this.own(claims);
    if (!ti || ti.try_number !== claims.try_number || ti.dispatch_gen !== claims.dispatch_gen) {
      throw new ConnectError(
        'this attempt was superseded by a later try; its write was not applied',
        Code.FailedPrecondition,
      );
    }
    return ti;
  }
}
