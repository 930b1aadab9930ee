export { buildDoctorReport, redactedConfig } from './report.js';
export {
  NOT_IN_THIS_BUILD,
  tokenTransportOf,
  type AgentChannelMode,
  type CheckStatus,
  type DoctorCheck,
  type DoctorDeps,
  type DoctorOptions,
  type DoctorReport,
  type DoctorStore,
  type Exposure,
  type FileInfo,
  type KeyFilePosture,
  type Posture,
  type RedactedConfig,
} from './report.js';
export { liveDoctorStore, nodeDoctorDeps, openDoctorStore } from './node-deps.js';
export { renderDoctorReport } from './render.js';
export { databaseUrlSecrets, REDACTED, redactDatabaseUrl, scrub } from './redact.js';
