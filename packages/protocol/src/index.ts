export * from './gen/leoflow/agent/v1/agent_pb.js';
export { dagSchema, DAG_SCHEMA_ID } from './dag-schema.js';
export * from './agent-protocol.js';
export * from './runner-session.js';
