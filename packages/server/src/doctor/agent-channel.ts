import { agentChannelMode } from '../rpc/agent-server.js';
import { AGENT_CERT_WARN_DAYS, certificateExpiry } from '../rpc/agent-tls.js';
import type { SectionContext } from './findings.js';
import type { Posture } from './types.js';

/**
 * Doctor section: the agent channel. Its mode comes from the agent transport itself
 * (agentChannelMode, which the control plane also uses to decide whether secrets may cross it);
 * this section turns it into a check, an exposure and the TLS files' presence.
 */
export async function agentChannel(ctx: SectionContext): Promise<Posture['agent_channel']> {
  const { cfg, stat, check, expose } = ctx;
  const agentAddress = `${cfg.agent.host}:${cfg.agent.port}`;
  const channel = agentChannelMode(cfg.agent);
  if (channel === 'cleartext-non-loopback') {
    check(
      'agent.channel',
      'fail',
      `the agent RPC is cleartext on ${agentAddress}, a non-loopback address: the server refuses to deliver Variables and Connections over it; set --agent-tls-cert and --agent-tls-key, or bind it to 127.0.0.1`,
    );
  } else if (channel === 'tls') {
    check('agent.channel', 'ok', `the agent RPC on ${agentAddress} is TLS`);
  } else {
    check(
      'agent.channel',
      'ok',
      `the agent RPC is cleartext on loopback (${agentAddress}); only local processes can reach it`,
    );
    expose(
      'agent_channel.cleartext_loopback',
      'The agent RPC is cleartext HTTP/2 on loopback: any local process can connect to it, though every call needs a valid attempt token.',
      'Set --agent-tls-cert and --agent-tls-key to encrypt it as well.',
    );
  }
  if (cfg.agent.tls !== null) {
    const missing: string[] = [];
    for (const f of [cfg.agent.tls.certFile, cfg.agent.tls.caFile]) {
      if (f !== null && (await stat(f)).info === null) missing.push(f);
    }
    if (missing.length > 0)
      check(
        'agent.tls_files',
        'fail',
        `${missing.join(', ')} does not exist: fix --agent-tls-cert / --agent-tls-ca`,
      );
    else {
      check(
        'agent.tls_files',
        'ok',
        `certificate ${cfg.agent.tls.certFile}${cfg.agent.tls.caFile ? `, CA ${cfg.agent.tls.caFile}` : ''} present`,
      );
      await certificateExpiryCheck(ctx, cfg.agent.tls.certFile);
    }
  }
  return {
    mode: channel,
    address: agentAddress,
    secrets_delivered: channel !== 'cleartext-non-loopback',
  };
}

/**
 * `agent.tls_expiry`: days left on the agent port's certificate, read from the file the server
 * serves (and reloads: a renewed file is what the next doctor run reads). Fails once expired —
 * agents refuse the handshake — and warns inside the last AGENT_CERT_WARN_DAYS.
 */
async function certificateExpiryCheck(ctx: SectionContext, certFile: string): Promise<void> {
  const text = await ctx.deps.readText(certFile);
  if (text === null) {
    ctx.check('agent.tls_expiry', 'fail', `cannot read ${certFile} to check its expiry`);
    return;
  }
  let expiry: ReturnType<typeof certificateExpiry>;
  try {
    expiry = certificateExpiry(text, ctx.deps.now?.() ?? Date.now());
  } catch {
    ctx.check('agent.tls_expiry', 'fail', `${certFile} holds no PEM certificate`);
    return;
  }
  const until = expiry.notAfter.toISOString();
  if (expiry.notAfter.getTime() <= (ctx.deps.now?.() ?? Date.now())) {
    ctx.check(
      'agent.tls_expiry',
      'fail',
      `the agent certificate ${certFile} expired on ${until}: agents cannot connect; replace the certificate and key (the server reloads them without a restart)`,
    );
  } else if (expiry.daysLeft < AGENT_CERT_WARN_DAYS) {
    ctx.check(
      'agent.tls_expiry',
      'warn',
      `the agent certificate ${certFile} expires on ${until} (${expiry.daysLeft} day(s) left): renew it; the server reloads it without a restart`,
    );
  } else {
    ctx.check(
      'agent.tls_expiry',
      'ok',
      `the agent certificate ${certFile} expires on ${until} (${expiry.daysLeft} days left)`,
    );
  }
}
