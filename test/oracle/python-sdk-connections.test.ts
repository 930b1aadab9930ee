import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  airflowOracleAvailability,
  airflowOracleVenv,
  AIRFLOW_ORACLE_HOWTO,
} from '../support/airflow-oracle.js';
import { REPO } from '../support/processes.js';

/**
 * The Python task SDK's Connection against Apache Airflow's task SDK (3.x): the same
 * attributes from the same AIRFLOW_CONN_* value, and the same get_uri(). Where Airflow accepts
 * a value the SDK refuses (an out-of-range port), the SDK's refusal is the expected answer.
 */
const availability = airflowOracleAvailability('oracle');

const values = [
  'postgresql://etl%40corp:p%40ss%2Fw@DB.Example.com:5432/wh?sslmode=require&application_name=leo',
  'http://example.com/path',
  'mysql://:pw@host',
  'mysql://user@host:3306',
  'postgres://us%2Fer:p%2Fw@h:1/sch%2Fema',
  'http://https://api.example.com:8443',
  'google-cloud-platform://?__extra__=%7B%22project%22%3A+%22p%22%2C+%22num_retries%22%3A+3%7D',
  'aws://?region_name=eu-west-1&role_arn=arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fr',
  'sqlite://%2Ftmp%2Fdb.sqlite',
  'redis://:secret@redis.internal:6379/0',
  'ssh://user:p%20w@10.0.0.1:22?key_file=%2Fk&no_host_key_check=true',
  'wasb://acct@',
  'generic://h?a=1&a=2',
  '  {"conn_type": "postgres", "host": "h", "login": "u", "password": "pw", "port": 5433, "schema": "db", "extra": {"sslmode": "verify-full", "n": 1}}\n',
  '{"conn_type": "aws", "extra": "{\\"region_name\\": \\"eu-west-1\\"}"}',
  '{"conn_type": "http", "host": "https://x.example", "port": "8080"}',
  '{"conn_type": "google_cloud_platform", "extra": {"keyfile_dict": {"a": 1}, "scopes": ["s"]}}',
];

describe.skipIf(availability === 'skip')('the Python SDK reads connections as Airflow does', () => {
  it('gives the same attributes and get_uri() for every value', () => {
    const venv = airflowOracleVenv('oracle');
    if (venv === null)
      throw new Error(`the Airflow oracle environment is missing: ${AIRFLOW_ORACLE_HOWTO}`);
    const out = execFileSync(
      join(venv, 'bin/python'),
      [join(REPO, 'test/oracle/python_sdk_connections_oracle.py')],
      {
        input: JSON.stringify(values),
        encoding: 'utf8',
        env: {
          ...process.env,
          PYTHONPATH: join(REPO, 'python/leoflow/src'),
          PYTHONDONTWRITEBYTECODE: '1',
          PYTHONWARNINGS: 'ignore',
        },
      },
    );
    // Airflow's structlog may write to stdout too; the answer is the last line
    const rows = JSON.parse(out.trim().split('\n').pop() ?? '') as {
      leoflow: unknown;
      airflow: unknown;
    }[];
    expect(rows).toHaveLength(values.length);
    rows.forEach((row, i) => expect(row.leoflow, values[i]).toEqual(row.airflow));
  });
});
