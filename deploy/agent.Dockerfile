# The Leoflow agent image the Kubernetes executor runs one pod of per attempt
# (executor.kubernetes.agent_image). Not built in this repository's CI: there is no container
# runtime here; build it with `docker build -f deploy/agent.Dockerfile .` after `npm run build`.
# Task images a tenant allowlists must be built FROM this one (the agent is their entrypoint).
FROM node:20-bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends python3 ca-certificates \
  && rm -rf /var/lib/apt/lists/*
# The bundled agent and the SDK node tasks import; nothing of the server.
COPY packages/agent/dist/leoflow-agent.mjs packages/agent/dist/leoflow-agent.cjs \
     packages/agent/dist/leoflow-agent.cjs.cache /opt/leoflow/agent/
COPY packages/sdk/dist/ /opt/leoflow/sdk/
ENV LEOFLOW_NODE_MODULES=/opt/leoflow/sdk
# A numeric non-root user: the pod runs with runAsNonRoot and runAsUser 65532 (PSA restricted).
USER 65532:65532
WORKDIR /work
ENTRYPOINT ["node", "/opt/leoflow/agent/leoflow-agent.mjs"]
