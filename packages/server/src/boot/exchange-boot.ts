import { LeoflowError } from '@leoflow/core';
import type { AgentChannelMode } from '../rpc/agent-server.js';
import type { BootstrapSecretKube } from '../executor/kubernetes/exchange/kube-bootstrap-secret.js';
import type { ExchangeKubeClient } from '../executor/kubernetes/exchange/kube-token-review.js';

/**
 * Boot fails closed under auth.agent_token_transport=exchange: without a Kubernetes client, over
 * a cleartext non-loopback agent channel, or without the TokenReview permission (asked with a
 * SelfSubjectAccessReview now, not discovered at the first pod's exchange). Under
 * auth.exchange_bootstrap=secret_key_ref the rights asked for are secrets create/get/patch/delete
 * in every tenant namespace instead: that path sends no TokenReview.
 */
export async function checkExchangeBoot(input: {
  kube: ExchangeKubeClient | null;
  channelMode: AgentChannelMode;
  /** set under auth.exchange_bootstrap=secret_key_ref: the client and the tenant namespaces */
  secretBootstrap?: { kube: BootstrapSecretKube; namespaces: readonly string[] };
  /** under secret_key_ref, TokenReviews are still needed (warm pools bootstrap from projected tokens) */
  alsoTokenReviews?: boolean;
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
  if (input.secretBootstrap) {
    let missing: string[];
    try {
      missing = await input.secretBootstrap.kube.missingSecretRights(
        input.secretBootstrap.namespaces,
      );
    } catch {
      missing = ['(the SelfSubjectAccessReview failed)'];
    }
    if (missing.length > 0) {
      throw new LeoflowError(
        'LF_EXCHANGE_SECRET_RIGHTS_MISSING',
        `auth.exchange_bootstrap=secret_key_ref but the control plane may not ${missing.join(', ')} on secrets; apply deploy/components/exchange-secret-fallback (its namespace Role grants secrets create/get/patch/delete) or set auth.exchange_bootstrap=projected_token`,
      );
    }
    if (!input.alsoTokenReviews) return;
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
