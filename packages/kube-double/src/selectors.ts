// Label and field selectors in their query-string syntax (labels.Parse / fields.ParseSelector).
import type { KubeObject } from './objects.js';
import { badRequest } from './status.js';

type Requirement =
  { key: string; op: 'in' | 'notin'; values: string[] } | { key: string; op: 'exists' | '!exists' };

export type Selector = (object: KubeObject) => boolean;

const everything: Selector = () => true;

/** Splits on commas that are not inside a parenthesised value set. */
function splitTerms(text: string): string[] {
  const terms: string[] = [];
  let depth = 0;
  let current = '';
  for (const char of text) {
    if (char === '(') depth += 1;
    if (char === ')') depth -= 1;
    if (char === ',' && depth === 0) {
      terms.push(current.trim());
      current = '';
    } else current += char;
  }
  if (current.trim() !== '') terms.push(current.trim());
  return terms;
}

function parseLabelTerm(term: string): Requirement {
  const setMatch = /^([^\s!=()]+)\s+(in|notin)\s*\(([^)]*)\)$/.exec(term);
  if (setMatch) {
    const values = (setMatch[3] ?? '')
      .split(',')
      .map((value) => value.trim())
      .filter((value) => value !== '');
    return { key: setMatch[1] ?? '', op: setMatch[2] === 'in' ? 'in' : 'notin', values };
  }
  const equality = /^([^\s!=]+)\s*(==|=|!=)\s*([^\s,]*)$/.exec(term);
  if (equality) {
    const op = equality[2] === '!=' ? 'notin' : 'in';
    return { key: equality[1] ?? '', op, values: [equality[3] ?? ''] };
  }
  if (/^![^\s!=()]+$/.test(term)) return { key: term.slice(1), op: '!exists' };
  if (/^[^\s!=()]+$/.test(term)) return { key: term, op: 'exists' };
  throw badRequest(
    `unable to parse requirement: found '${term}', expected: !, identifier, or 'end of string'`,
  );
}

export function parseLabelSelector(text: string | null): Selector {
  if (text === null || text.trim() === '') return everything;
  const requirements = splitTerms(text).map(parseLabelTerm);
  return (object) => {
    const labels = object.metadata.labels ?? {};
    return requirements.every((requirement) => {
      const has = Object.prototype.hasOwnProperty.call(labels, requirement.key);
      switch (requirement.op) {
        case 'exists':
          return has;
        case '!exists':
          return !has;
        case 'in':
          return has && requirement.values.includes(labels[requirement.key] ?? '');
        case 'notin':
          return !has || !requirement.values.includes(labels[requirement.key] ?? '');
      }
    });
  };
}

/** The fields a field selector may name, per kind, as the apiserver registers them. */
function fieldValue(object: KubeObject, field: string): string | undefined {
  switch (field) {
    case 'metadata.name':
      return object.metadata.name ?? '';
    case 'metadata.namespace':
      return object.metadata.namespace ?? '';
  }
  if (object.kind === 'Pod') {
    const spec = object.spec as { nodeName?: string; serviceAccountName?: string } | undefined;
    const status = object.status as { phase?: string } | undefined;
    if (field === 'spec.nodeName') return spec?.nodeName ?? '';
    if (field === 'spec.serviceAccountName') return spec?.serviceAccountName ?? '';
    if (field === 'status.phase') return status?.phase ?? '';
  }
  if (object.kind === 'Secret' && field === 'type')
    return (object.type as string | undefined) ?? '';
  return undefined;
}

export function parseFieldSelector(text: string | null, kind: string): Selector {
  if (text === null || text.trim() === '') return everything;
  const terms = splitTerms(text).map((term) => {
    const match = /^([^!=]+)(==|=|!=)(.*)$/.exec(term);
    if (!match) throw badRequest(`invalid selector: '${text}'; can't understand '${term}'`);
    return { field: (match[1] ?? '').trim(), negated: match[2] === '!=', value: match[3] ?? '' };
  });
  return (object) =>
    terms.every((term) => {
      const actual = fieldValue({ ...object, kind }, term.field);
      if (actual === undefined) return false;
      return term.negated ? actual !== term.value : actual === term.value;
    });
}

/** Whether a field selector only names fields the kind supports (else the apiserver answers 400). */
export function assertFieldSelectorSupported(
  text: string | null,
  kind: string,
  sample: KubeObject,
): void {
  if (text === null || text.trim() === '') return;
  for (const term of splitTerms(text)) {
    const field = (/^([^!=]+)/.exec(term)?.[1] ?? '').trim();
    if (fieldValue({ ...sample, kind }, field) === undefined) {
      throw badRequest(`field label not supported: ${field}`);
    }
  }
}
