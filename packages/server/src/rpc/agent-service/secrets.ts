import { create } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import {
  ERROR_CODE_METADATA,
  GetConnectionsResponseSchema,
  GetVariablesResponseSchema,
} from '@leoflow/protocol';
import { SecretRefusal, SecretUnavailable } from '../../attempts/secret-delivery.js';
import { attemptPrincipal } from '../agent-auth.js';
import type { AgentHandlers, AgentServiceContext } from './context.js';

/** GetVariables and GetConnections: delivery under the liveness gate and scoping. */
export function secretHandlers(
  c: AgentServiceContext,
): AgentHandlers<'getVariables' | 'getConnections'> {
  return {
    async getVariables(_req, ctx) {
      const { claims } = attemptPrincipal(ctx);
      const variables = await refusalsAsPermissionDenied(() => c.deps.secrets.variables(claims));
      return create(GetVariablesResponseSchema, { variables });
    },
    async getConnections(_req, ctx) {
      const { claims } = attemptPrincipal(ctx);
      const connectionUris = await refusalsAsPermissionDenied(() =>
        c.deps.secrets.connections(claims),
      );
      return create(GetConnectionsResponseSchema, { connectionUris });
    },
  };
}

async function refusalsAsPermissionDenied<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof SecretRefusal) {
      // The code the agent acts on travels as metadata; it never reads the message.
      throw new ConnectError(
        err.message,
        Code.PermissionDenied,
        err.code ? { [ERROR_CODE_METADATA]: err.code } : undefined,
      );
    }
    if (err instanceof SecretUnavailable) throw new ConnectError(err.message, Code.Unavailable);
    throw err;
  }
}
