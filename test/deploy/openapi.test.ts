/**
 * Every object deploy/ renders (the real `kubectl kustomize`) checked against the Kubernetes
 * OpenAPI schemas, in two halves that together make what a strict `kubectl apply` to a real
 * apiserver checks:
 *
 * - types, required fields, enums and formats: the JSON-schema validators `kubernetes-models`
 *   compiles from the Kubernetes OpenAPI document (pinned 4.5.1, runs on Node 20);
 * - unknown fields (the apiserver's strict field validation): those schemas leave
 *   additionalProperties open, so each field is looked up in the attribute maps
 *   `@kubernetes/client-node` generates from the same OpenAPI document.
 *
 * The two self-checks at the end prove each half refuses what it should, so a validator that
 * silently accepts everything cannot pass this file.
 */
import * as k8s from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { find, render, type Manifest } from '../support/manifests.js';

interface Model {
  validate(): void;
}
type ModelClass = new (data: unknown) => Model;

/** The kubernetes-models class of an object: `apps/v1` + Deployment → kubernetes-models/apps/v1. */
async function schemaModel(o: Manifest): Promise<ModelClass> {
  const module = `kubernetes-models/${o.apiVersion}`;
  const exports = (await import(module)) as Record<string, unknown>;
  const model = exports[o.kind];
  if (typeof model !== 'function') throw new Error(`${module} has no schema for ${o.kind}`);
  return model as ModelClass;
}

/** The schema's refusals of an object, as "path message" lines. */
async function schemaErrors(o: Manifest): Promise<string[]> {
  const Model = await schemaModel(o);
  try {
    new Model(o).validate();
    return [];
  } catch (err) {
    return String((err as Error).message)
      .split(/,\s*(?=data)/)
      .map((s) => s.trim());
  }
}

interface AttributeMap {
  getAttributeTypeMap(): { baseName: string; type: string }[];
}

/** The client-node model of a generated type name (V1PodSpec), or undefined for a primitive. */
function attributeModel(type: string): AttributeMap | undefined {
  const m = (k8s as unknown as Record<string, unknown>)[type];
  return typeof (m as AttributeMap | undefined)?.getAttributeTypeMap === 'function'
    ? (m as AttributeMap)
    : undefined;
}

/** The kind's client-node model: apps/v1 Deployment → V1Deployment. */
function kindModel(o: Manifest): AttributeMap {
  const version = o.apiVersion.split('/').pop()!;
  const name = `${version[0]!.toUpperCase()}${version.slice(1)}${o.kind}`;
  const m = attributeModel(name);
  if (!m) throw new Error(`@kubernetes/client-node has no model ${name}`);
  return m;
}

/** Fields the OpenAPI document does not define, as JSON paths (what strict validation refuses). */
function unknownFields(value: unknown, model: AttributeMap, path: string, out: string[]): string[] {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return out;
  const fields = new Map(model.getAttributeTypeMap().map((a) => [a.baseName, a.type]));
  for (const [key, v] of Object.entries(value)) {
    const type = fields.get(key);
    if (type === undefined) {
      out.push(`${path}.${key}`);
      continue;
    }
    const element = /^Array<(.+)>$/.exec(type)?.[1];
    const mapOf = /^\{ \[key: string\]: (.+); \}$/.exec(type)?.[1];
    if (element && Array.isArray(v)) {
      const m = attributeModel(element);
      if (m) v.forEach((item, i) => unknownFields(item, m, `${path}.${key}[${i}]`, out));
    } else if (mapOf && v && typeof v === 'object') {
      const m = attributeModel(mapOf);
      if (m)
        for (const [k, item] of Object.entries(v))
          unknownFields(item, m, `${path}.${key}.${k}`, out);
    } else {
      const m = attributeModel(type);
      if (m) unknownFields(v, m, `${path}.${key}`, out);
    }
  }
  return out;
}

describe.each(['deploy/base', 'deploy/overlays/example'])(
  '%s against the OpenAPI schemas',
  (dir) => {
    const objects = render(dir);

    it.each(objects.map((o) => [`${o.kind}/${o.metadata.name}`, o] as const))(
      '%s: valid types, required fields and formats; no field the schema does not define',
      async (_name, o) => {
        expect(await schemaErrors(o)).toEqual([]);
        expect(unknownFields(o, kindModel(o), '', [])).toEqual([]);
      },
    );
  },
);

describe('the validation refuses what a strict apply refuses', () => {
  const deployment = find(render('deploy/base'), 'Deployment', 'leoflow-scheduler');
  type Spec = {
    replicas: unknown;
    template: { spec: { containers: Record<string, unknown>[] } };
  };

  it('a wrong type and a missing required field (the schema half)', async () => {
    const bad = structuredClone(deployment);
    (bad.spec as Spec).replicas = 'two';
    delete (bad.spec as Spec).template.spec.containers[0]!.name;
    const errors = await schemaErrors(bad);
    expect(errors.join('\n')).toMatch(/spec\/replicas must be integer/);
    expect(errors.join('\n')).toMatch(/must have required property name/);
  });

  it('a misspelt field, at any depth (the unknown-field half)', () => {
    const bad = structuredClone(deployment);
    (bad.spec as Spec).template.spec.containers[0]!.imagePullPolice = 'Always';
    (bad.spec as Record<string, unknown>).replica = 2;
    expect(unknownFields(bad, kindModel(bad), '', []).sort()).toEqual([
      '.spec.replica',
      '.spec.template.spec.containers[0].imagePullPolice',
    ]);
  });
});
