import { LeoflowError } from '@leoflow/core';
import type { AgentChannelMode } from '../rpc/agent-server.js';
import type { ExchangeKubeClient } from './kube-token-review.js';

/**
 * Boot fails closed under auth.agent_token_transport=exchange: without a Kubernetes client, over
 * a cleartext non-loopback agent channel, or without the TokenReview permission (asked with a
 * SelfSubjectAccessReview now, not discovered at the first pod's exchange).
 */
export async function checkExchangeBoot(input: {
  kube: ExchangeKubeClient | null;
  channelMode: AgentChannelMode;
}): Promise<void> {
  if (!input.kube) {
    throw new LeoflowError(
      'LF_EXCHANGE_NO_KUBERNETES',
      'auth.agent_token_transport=exchange but no Kubernetes executor is configured; configure executor.kubernetes or set the transport to envvar',
    );
  }
  if (input.channelMode === 'cleartext-non-loopback') {
    throw new LeoflowError(
      'LF_EXCHANGE_INSECURE_CHANNEL',
      'auth.agent_token_transport=exchange over a cleartext non-loopback agent channel; configure agent.tls',
    );
  }
  let allowed: boolean;
  try {
    allowed = await input.kube.canCreateTokenReviews();
  } catch {
    allowed = false;
  }
  if (!allowed) {
    throw new LeoflowError(
      'LF_EXCHANGE_TOKENREVIEW_FORBIDDEN',
      'auth.agent_token_transport=exchange but the control plane may not create authentication.k8s.io/tokenreviews; apply deploy/components/exchange (its ClusterRole and ClusterRoleBinding) or set the transport to envvar',
    );
  }
}
