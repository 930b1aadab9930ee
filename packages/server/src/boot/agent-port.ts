import type { Logger } from 'pino';
import { agentUrl as agentUrlOf, type ServerConfig } from '../config/server-config.js';
import { bindAgentPort, type AgentPort } from '../rpc/agent-server.js';
import { loadAgentTls, reloadAgentTlsOnChange } from '../rpc/agent-tls.js';
import type { Lifecycle } from './lifecycle.js';
import { bindNamed } from './port-binding.js';

/**
 * Binds the agent port before the plane exists, so the URL agents dial is a value for everything
 * built after (the scheduler's launches, warm pool pods). It serves once the plane is assembled.
 */
export async function openAgentPort(
  cfg: ServerConfig,
  logger: Logger,
  life: Lifecycle,
): Promise<{ agentPort: AgentPort; agentUrl: string }> {
  const tlsFiles = cfg.agent.tls;
  const initialTls = tlsFiles ? await loadAgentTls(tlsFiles) : null;
  const agentPort = await bindNamed({ flag: '--agent-port', port: cfg.agent.port }, () =>
    bindAgentPort({ host: cfg.agent.host, port: cfg.agent.port, tls: initialTls?.tls ?? null }),
  );
  // Agents' streams are let finish; they reconnect to another replica through the agent URL.
  life.add({ name: 'agent port', stop: () => agentPort.close() });
  const agentUrl = agentUrlOf(cfg, agentPort.port);
  // The operator's certificate files may be replaced while we run (renewal, a Secret update).
  if (tlsFiles && initialTls) {
    const tlsReloader = reloadAgentTlsOnChange(agentPort, tlsFiles, initialTls, logger);
    life.add({ name: 'agent TLS reload', stop: () => tlsReloader.stop() });
  }
  return { agentPort, agentUrl };
}
