import { childPath } from './diagnostics.js';
import type { KubernetesIssue } from './kubernetes.js';
import type { TaskSpecDef } from './spec.js';

/** A runner label's name (the runner records' rule, so a task can name any label a runner has). */
export const RUNNER_LABEL_KEY = /^[a-z0-9][a-z0-9._/-]{0,62}$/;
export const RUNNER_LABEL_VALUE = /^[A-Za-z0-9._-]{0,63}$/;
export const MAX_RUNNER_LABELS = 32;

/**
 * Shape checks on a task's `runner_labels`: a mapping of label names to string values, on a
 * task that chooses `executor: runner` (anywhere else it would silently mean nothing).
 */
export function checkRunnerLabels(task: TaskSpecDef, base: string): KubernetesIssue[] {
  const value: unknown = task.runner_labels;
  const issues: KubernetesIssue[] = [];
  if (task.executor !== 'runner') {
    issues.push({
      path: base,
      message: 'runner_labels applies only to a task with executor: runner',
      hint: 'add executor: runner to the task, or remove runner_labels',
    });
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    issues.push({
      path: base,
      message: 'runner_labels must be a mapping of label names to values',
      hint: 'write runner_labels:\n      gpu: a100',
    });
    return issues;
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > MAX_RUNNER_LABELS) {
    issues.push({
      path: base,
      message: `runner_labels holds ${entries.length} labels; at most ${MAX_RUNNER_LABELS}`,
      hint: 'a runner carries at most 32 labels, so a task can require no more',
    });
  }
  for (const [k, v] of entries) {
    if (!RUNNER_LABEL_KEY.test(k)) {
      issues.push({
        path: childPath(base, k),
        message: `runner label name ${JSON.stringify(k)} is not a label name`,
        hint: 'a label name is 1-63 of a-z 0-9 . _ / - starting with a letter or digit',
      });
    } else if (typeof v !== 'string' || !RUNNER_LABEL_VALUE.test(v)) {
      issues.push({
        path: childPath(base, k),
        message: `runner label ${k} must have a string value of up to 63 of A-Z a-z 0-9 . _ -`,
        hint: `quote it: ${k}: "value"`,
      });
    }
  }
  return issues;
}
