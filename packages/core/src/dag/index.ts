export * from './spec.js';
export { compileDagYaml, type CompileInput, type CompileResult } from './compile.js';
export { validateDagSpec, type DagSpecError, type DagSpecValidation } from './validate.js';
export { dagSpecHash, canonicalJson } from './canonical.js';
export { sha256Hex } from './sha256.js';
export {
  formatDiagnostic,
  DAG_ERROR_CODES,
  type CompileDiagnostic,
  type DagErrorCode,
} from './diagnostics.js';
export {
  checkKubernetesAllowed,
  checkKubernetesShape,
  parseQuantity,
  resolveKubernetesChoices,
  KubernetesChoiceError,
  KUBERNETES_RESOURCE_NAMES,
  type KubernetesAllowlist,
  type KubernetesIssue,
  type KubernetesResourceName,
  type ResolvedKubernetes,
  type ResourceList,
  type TaskKubernetes,
  type TaskResources,
} from './kubernetes.js';
export {
  checkRunnerLabels,
  MAX_RUNNER_LABELS,
  RUNNER_LABEL_KEY,
  RUNNER_LABEL_VALUE,
} from './runner-labels.js';
export { locateDeclaration, type YamlPosition } from './locate.js';
