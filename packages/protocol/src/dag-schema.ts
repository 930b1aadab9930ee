import schema from '../schema/dag.schema.json' with { type: 'json' };

export const DAG_SCHEMA_ID = schema.$id;
export const dagSchema: Record<string, unknown> = schema;
