/**
 * A fake warm worker, as the warm-pool tests drive it: a Connect client on the real agent port
 * that exchanges a pool pod's projected token and waits on AwaitAssignment.
 */
import { Code, ConnectError, type Client } from '@connectrpc/connect';
import type { CoreV1Api } from '@kubernetes/client-node';
import {
  AGENT_PROTOCOL_VERSION,
  BootstrapCredentialKind,
  type AgentService,
  type AwaitAssignmentResponse,
} from '@leoflow/protocol';
import { EXCHANGE_AUDIENCE } from '../../../src/executor/kubernetes/exchange/audience.js';
import { waitFor as waitUntil } from '../../support/observe.js';

export type AgentClient = Client<typeof AgentService>;

/** A pod as the double stores it (the fields the tests read). */
export type Pod = {
  metadata: {
    name: string;
    namespace: string;
    uid: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec: Record<string, unknown>;
};

/** A token, and the session key its attempt's Register bound (issue 34), as call options. */
export const bearer = (token: string, session?: string) => ({
  headers: {
    authorization: `Bearer ${token}`,
    ...(session !== undefined ? { 'leoflow-session': session } : {}),
  },
});

/** Polls for up to 20 s. */
export const waitFor = <T>(what: string, probe: () => Promise<T | undefined>) =>
  waitUntil(what, probe, 20_000, 25);

export async function codeOf(p: Promise<unknown>): Promise<Code | 'ok'> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    return ConnectError.from(err).code;
  }
}

/** A refusal's code and (unprefixed) message, or 'ok' when the call was answered. */
export async function refusalOf(
  p: Promise<unknown>,
): Promise<{ code: Code; message: string } | 'ok'> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    const e = ConnectError.from(err);
    return { code: e.code, message: e.rawMessage };
  }
}

/** A projected service-account token bound to `pod`, for the exchange's audience. */
export async function projectedToken(
  core: CoreV1Api,
  pod: Pod,
  serviceAccount: string,
): Promise<string> {
  const reply = await core.createNamespacedServiceAccountToken({
    namespace: pod.metadata.namespace,
    name: serviceAccount,
    body: {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: {
        audiences: [EXCHANGE_AUDIENCE],
        expirationSeconds: 600,
        boundObjectRef: {
          kind: 'Pod',
          apiVersion: 'v1',
          name: pod.metadata.name,
          uid: pod.metadata.uid,
        },
      },
    },
  });
  return reply.status?.token ?? '';
}

export function exchangeProjected(client: AgentClient, credential: string) {
  return client.exchangeToken({
    kind: BootstrapCredentialKind.PROJECTED_SERVICE_ACCOUNT_TOKEN,
    credential,
    protocolVersion: AGENT_PROTOCOL_VERSION,
  });
}

/** A worker's AwaitAssignment stream (one free slot): its events in order, as they arrive. */
export function openWorkerStream(client: AgentClient, token: string) {
  const abort = new AbortController();
  const events: AwaitAssignmentResponse[] = [];
  let failure: ConnectError | null = null;
  let ended = false;
  void (async () => {
    try {
      for await (const m of client.awaitAssignment(
        { freeSlots: 1, protocolVersion: AGENT_PROTOCOL_VERSION, agentVersion: 'test' },
        { ...bearer(token), signal: abort.signal },
      )) {
        events.push(m);
      }
    } catch (err) {
      failure = ConnectError.from(err);
    } finally {
      ended = true;
    }
  })();
  return {
    events,
    failure: () => failure,
    ended: () => ended,
    close: () => abort.abort(),
    next: async <K extends NonNullable<AwaitAssignmentResponse['event']['case']>>(kind: K) => {
      const m = await waitFor(`a ${kind} event`, () =>
        Promise.resolve(events.find((e) => e.event.case === kind)),
      );
      events.splice(events.indexOf(m), 1);
      return m.event.value as Extract<AwaitAssignmentResponse['event'], { case: K }>['value'];
    },
  };
}
