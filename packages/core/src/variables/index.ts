export { variableEnvName, VAR_ENV_PREFIX } from './env-name.js';
export { maskVariableValue } from './masking.js';
export { parseAirflowVariablesExport, type ImportedVariable } from './export-file.js';
export { formatAirflowVariablesExport } from './export-writer.js';
