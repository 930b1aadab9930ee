/**
 * The executor kinds this build has, as settings name them (`executor.default`, a task's
 * `executor:`). executor/catalog.ts keys each kind's behaviour by these names, and the compiler
 * holds it to every one of them.
 */
export const EXECUTOR_KIND_NAMES = ['subprocess', 'kubernetes', 'runner'] as const;

export type ExecutorKindName = (typeof EXECUTOR_KIND_NAMES)[number];
