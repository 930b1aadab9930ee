// Decoding the Kubernetes protobuf request bodies that kubectl's typed clients send
// (`Content-Type: application/vnd.kubernetes.protobuf`: the `k8s\0` magic, then a runtime.Unknown
// envelope whose `raw` is the object in the wire format of k8s.io/api's generated.proto). The
// double answers in JSON, which those clients accept (they send
// `Accept: application/vnd.kubernetes.protobuf,application/json`). Only the kinds those commands
// create are described; any other protobuf body is refused with 415 and the kind named.

type Scalar = 'string' | 'bytes' | 'int' | 'bool' | 'time';
interface Field {
  name: string;
  type: Scalar | Schema | { map: 'string' | 'bytes' };
  repeated?: boolean;
}
export type Schema = { [fieldNumber: number]: Field };

const TIME: Schema = { 1: { name: 'seconds', type: 'int' }, 2: { name: 'nanos', type: 'int' } };
const OWNER_REFERENCE: Schema = {
  1: { name: 'kind', type: 'string' },
  3: { name: 'name', type: 'string' },
  4: { name: 'uid', type: 'string' },
  5: { name: 'apiVersion', type: 'string' },
  6: { name: 'controller', type: 'bool' },
  7: { name: 'blockOwnerDeletion', type: 'bool' },
};
const OBJECT_META: Schema = {
  1: { name: 'name', type: 'string' },
  2: { name: 'generateName', type: 'string' },
  3: { name: 'namespace', type: 'string' },
  5: { name: 'uid', type: 'string' },
  6: { name: 'resourceVersion', type: 'string' },
  7: { name: 'generation', type: 'int' },
  8: { name: 'creationTimestamp', type: 'time' },
  9: { name: 'deletionTimestamp', type: 'time' },
  10: { name: 'deletionGracePeriodSeconds', type: 'int' },
  11: { name: 'labels', type: { map: 'string' } },
  12: { name: 'annotations', type: { map: 'string' } },
  13: { name: 'ownerReferences', type: OWNER_REFERENCE, repeated: true },
  14: { name: 'finalizers', type: 'string', repeated: true },
};
const LOCAL_OBJECT_REFERENCE: Schema = { 1: { name: 'name', type: 'string' } };
const OBJECT_REFERENCE: Schema = {
  1: { name: 'kind', type: 'string' },
  2: { name: 'namespace', type: 'string' },
  3: { name: 'name', type: 'string' },
  4: { name: 'uid', type: 'string' },
  5: { name: 'apiVersion', type: 'string' },
  6: { name: 'resourceVersion', type: 'string' },
  7: { name: 'fieldPath', type: 'string' },
};
const RESOURCE_ATTRIBUTES: Schema = {
  1: { name: 'namespace', type: 'string' },
  2: { name: 'verb', type: 'string' },
  3: { name: 'group', type: 'string' },
  4: { name: 'version', type: 'string' },
  5: { name: 'resource', type: 'string' },
  6: { name: 'subresource', type: 'string' },
  7: { name: 'name', type: 'string' },
};
const NON_RESOURCE_ATTRIBUTES: Schema = {
  1: { name: 'path', type: 'string' },
  2: { name: 'verb', type: 'string' },
};

/** The top-level kinds, by `apiVersion/kind` of the envelope's TypeMeta. */
export const SCHEMAS: Record<string, Schema> = {
  'v1/Namespace': {
    1: { name: 'metadata', type: OBJECT_META },
    2: { name: 'spec', type: { 1: { name: 'finalizers', type: 'string', repeated: true } } },
  },
  'v1/ServiceAccount': {
    1: { name: 'metadata', type: OBJECT_META },
    2: { name: 'secrets', type: OBJECT_REFERENCE, repeated: true },
    3: { name: 'imagePullSecrets', type: LOCAL_OBJECT_REFERENCE, repeated: true },
    4: { name: 'automountServiceAccountToken', type: 'bool' },
  },
  'v1/Secret': {
    1: { name: 'metadata', type: OBJECT_META },
    2: { name: 'data', type: { map: 'bytes' } },
    3: { name: 'type', type: 'string' },
    4: { name: 'stringData', type: { map: 'string' } },
    5: { name: 'immutable', type: 'bool' },
  },
  'v1/ConfigMap': {
    1: { name: 'metadata', type: OBJECT_META },
    2: { name: 'data', type: { map: 'string' } },
    3: { name: 'binaryData', type: { map: 'bytes' } },
    4: { name: 'immutable', type: 'bool' },
  },
  'authentication.k8s.io/v1/TokenRequest': {
    1: { name: 'metadata', type: OBJECT_META },
    2: {
      name: 'spec',
      type: {
        1: { name: 'audiences', type: 'string', repeated: true },
        3: {
          name: 'boundObjectRef',
          type: {
            1: { name: 'kind', type: 'string' },
            2: { name: 'apiVersion', type: 'string' },
            3: { name: 'name', type: 'string' },
            4: { name: 'uid', type: 'string' },
          },
        },
        4: { name: 'expirationSeconds', type: 'int' },
      },
    },
  },
  'authentication.k8s.io/v1/TokenReview': {
    1: { name: 'metadata', type: OBJECT_META },
    2: {
      name: 'spec',
      type: {
        1: { name: 'token', type: 'string' },
        2: { name: 'audiences', type: 'string', repeated: true },
      },
    },
  },
  'authentication.k8s.io/v1/SelfSubjectReview': { 1: { name: 'metadata', type: OBJECT_META } },
  'authorization.k8s.io/v1/SelfSubjectAccessReview': {
    1: { name: 'metadata', type: OBJECT_META },
    2: {
      name: 'spec',
      type: {
        1: { name: 'resourceAttributes', type: RESOURCE_ATTRIBUTES },
        2: { name: 'nonResourceAttributes', type: NON_RESOURCE_ATTRIBUTES },
      },
    },
  },
};

interface WireField {
  number: number;
  wireType: number;
  varint?: bigint;
  bytes?: Buffer;
}

function readVarint(buffer: Buffer, offset: number): [bigint, number] {
  let result = 0n;
  let shift = 0n;
  let position = offset;
  for (;;) {
    const byte = buffer[position];
    if (byte === undefined) throw new Error('truncated varint');
    position += 1;
    result |= BigInt(byte & 0x7f) << shift;
    if ((byte & 0x80) === 0) return [result, position];
    shift += 7n;
  }
}

export function readWireFields(buffer: Buffer): WireField[] {
  const fields: WireField[] = [];
  let offset = 0;
  while (offset < buffer.length) {
    const [tag, afterTag] = readVarint(buffer, offset);
    const number = Number(tag >> 3n);
    const wireType = Number(tag & 7n);
    offset = afterTag;
    if (wireType === 0) {
      const [value, next] = readVarint(buffer, offset);
      fields.push({ number, wireType, varint: value });
      offset = next;
    } else if (wireType === 2) {
      const [length, next] = readVarint(buffer, offset);
      const end = next + Number(length);
      fields.push({ number, wireType, bytes: buffer.subarray(next, end) });
      offset = end;
    } else if (wireType === 1) {
      fields.push({ number, wireType, bytes: buffer.subarray(offset, offset + 8) });
      offset += 8;
    } else if (wireType === 5) {
      fields.push({ number, wireType, bytes: buffer.subarray(offset, offset + 4) });
      offset += 4;
    } else throw new Error(`unsupported protobuf wire type ${wireType}`);
  }
  return fields;
}

function decodeMessage(buffer: Buffer, schema: Schema): Record<string, unknown> {
  const result: Record<string, unknown> = {};
  for (const wire of readWireFields(buffer)) {
    const field = schema[wire.number];
    if (field === undefined) continue;
    let value: unknown;
    const type = field.type;
    if (typeof type === 'string') {
      switch (type) {
        case 'string':
          value = wire.bytes?.toString('utf8') ?? '';
          break;
        case 'bytes':
          value = (wire.bytes ?? Buffer.alloc(0)).toString('base64');
          break;
        case 'int':
          value = Number(BigInt.asIntN(64, wire.varint ?? 0n));
          break;
        case 'bool':
          value = (wire.varint ?? 0n) !== 0n;
          break;
        case 'time': {
          const time = decodeMessage(wire.bytes ?? Buffer.alloc(0), TIME) as { seconds?: number };
          value = new Date((time.seconds ?? 0) * 1000).toISOString().replace('.000Z', 'Z');
          break;
        }
      }
    } else if ('map' in type) {
      const entry = decodeMessage(wire.bytes ?? Buffer.alloc(0), {
        1: { name: 'key', type: 'string' },
        2: { name: 'value', type: type.map },
      }) as { key?: string; value?: unknown };
      const map = (result[field.name] ?? {}) as Record<string, unknown>;
      map[entry.key ?? ''] = entry.value ?? (type.map === 'bytes' ? '' : '');
      result[field.name] = map;
      continue;
    } else {
      value = decodeMessage(wire.bytes ?? Buffer.alloc(0), type);
    }
    // gogo-protobuf writes unset strings and times as empty values; JSON would omit them.
    if (!field.repeated && (value === '' || value === '1970-01-01T00:00:00Z')) continue;
    if (field.repeated) {
      const list = (result[field.name] ?? []) as unknown[];
      list.push(value);
      result[field.name] = list;
    } else result[field.name] = value;
  }
  return result;
}

const MAGIC = Buffer.from([0x6b, 0x38, 0x73, 0x00]);

/** Decodes a `k8s\0`-framed protobuf body into the JSON object it stands for. */
export function decodeKubernetesProtobuf(body: Buffer): Record<string, unknown> {
  if (body.length < 4 || !body.subarray(0, 4).equals(MAGIC)) {
    throw new Error('protobuf body without the k8s magic prefix');
  }
  const envelope = decodeMessage(body.subarray(4), {
    1: {
      name: 'typeMeta',
      type: { 1: { name: 'apiVersion', type: 'string' }, 2: { name: 'kind', type: 'string' } },
    },
    2: { name: 'raw', type: 'bytes' },
  }) as { typeMeta?: { apiVersion?: string; kind?: string }; raw?: string };
  const apiVersion = envelope.typeMeta?.apiVersion ?? '';
  const kind = envelope.typeMeta?.kind ?? '';
  const schema = SCHEMAS[`${apiVersion}/${kind}`];
  if (schema === undefined) throw new UnsupportedProtobufKind(apiVersion, kind);
  const object = decodeMessage(Buffer.from(envelope.raw ?? '', 'base64'), schema);
  return { apiVersion, kind, ...object };
}

export class UnsupportedProtobufKind extends Error {
  constructor(
    readonly apiVersion: string,
    readonly kind: string,
  ) {
    super(`the double decodes no protobuf body of kind ${apiVersion}/${kind}; send it as JSON`);
  }
}
