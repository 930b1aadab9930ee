import { Code, ConnectError } from '@connectrpc/connect';
import type { AgentHandlers, AgentServiceContext } from './context.js';

/** AwaitAssignment and AckAssignment, handed to the assignment streams (rpc/assignment-rpc.ts) when wired. */
export function assignmentHandlers(
  c: AgentServiceContext,
): AgentHandlers<'awaitAssignment' | 'ackAssignment'> {
  return {
    awaitAssignment(req, ctx) {
      if (c.deps.assignments) return c.deps.assignments.awaitAssignment(req, ctx);
      return noAssignments();
    },
    ackAssignment(req, ctx) {
      if (c.deps.assignments) return c.deps.assignments.ackAssignment(req, ctx);
      throw new ConnectError(
        'this control plane has no warm pool or runner to assign attempts to',
        Code.Unimplemented,
      );
    },
  };
}

/** A stream that refuses before its first message. */
function noAssignments(): AsyncIterable<never> {
  return {
    [Symbol.asyncIterator]: () => ({
      next: () =>
        Promise.reject(
          new ConnectError(
            'this control plane has no warm pool or runner to assign attempts to',
            Code.Unimplemented,
          ),
        ),
    }),
  };
}
