import { describe, expect, it } from 'vitest';
import {
  checkConnectionStructure,
  resolveGcpConnectionFields,
  type Connection,
  type ConnectionCheckInput,
} from '@leoflow/core';

const PRIVATE_KEY =
  '-----BEGIN PRIVATE KEY-----\nMIIEvQ-not-a-real-key\n-----END PRIVATE KEY-----\n';
const KEY = {
  type: 'service_account',
  project_id: 'p',
  private_key_id: 'abc123def',
  private_key: PRIVATE_KEY,
  client_email: 'sa@p.iam.gserviceaccount.com',
  client_id: '1234567890',
};

const gcp = (extra: ConnectionCheckInput['extra']): ConnectionCheckInput => ({
  conn_type: 'google_cloud_platform',
  host: null,
  login: null,
  password: null,
  schema: null,
  port: null,
  extra,
});

const check = (extra: ConnectionCheckInput['extra']) => checkConnectionStructure(gcp(extra));
const named = (extra: ConnectionCheckInput['extra'], name: string) =>
  check(extra).checks.find((c) => c.name === name);

/** No check message may carry key material. */
function expectNoKeyMaterial(extra: ConnectionCheckInput['extra']) {
  const text = JSON.stringify(check(extra));
  expect(text).not.toContain('MIIEvQ');
  expect(text).not.toContain('abc123def');
  expect(text).not.toContain('1234567890');
}

describe('T92: extra that is not JSON', () => {
  it('ok=false, message begins "invalid Extra JSON"', () => {
    const r = check('not json');
    expect(r.ok).toBe(false);
    expect(r.checks[0]!.message.startsWith('invalid Extra JSON')).toBe(true);
    expect(r.checks[0]!.message).not.toContain('not json');
  });

  it('a JSON string that is not an object is refused the same way', () => {
    expect(check('[1]').checks[0]!.message).toMatch(/^invalid Extra JSON/);
  });

  it('resolveGcpConnectionFields throws LF_GCP_CONN_INVALID', () => {
    expect(() => resolveGcpConnectionFields('not json')).toThrow(
      expect.objectContaining({ code: 'LF_GCP_CONN_INVALID' }),
    );
  });
});

describe('T93: keyfile_dict that looks like a service-account key', () => {
  it('as an object: ok, message names the client_email and nothing else of the key', () => {
    const r = check({ keyfile_dict: KEY });
    expect(r.ok).toBe(true);
    expect(named({ keyfile_dict: KEY }, 'keyfile_dict')!.message).toContain(
      'sa@p.iam.gserviceaccount.com',
    );
    expectNoKeyMaterial({ keyfile_dict: KEY });
  });

  it('as a JSON string: the same result', () => {
    const asString = { keyfile_dict: JSON.stringify(KEY) };
    expect(check(asString)).toEqual(check({ keyfile_dict: KEY }));
    expectNoKeyMaterial(asString);
  });

  it('the message discourages storing the key', () => {
    expect(named({ keyfile_dict: KEY }, 'keyfile_dict')!.message).toMatch(/prefer keyless/);
  });
});

describe('T94: keyfile_dict that is not a usable service-account key', () => {
  it('missing private_key → "keyfile_dict missing required field: private_key"', () => {
    const { private_key: _, ...noKey } = KEY;
    const r = check({ keyfile_dict: noKey });
    expect(r.ok).toBe(false);
    expect(named({ keyfile_dict: noKey }, 'keyfile_dict')!.message).toBe(
      'keyfile_dict missing required field: private_key',
    );
  });

  it.each(['type', 'client_email', 'project_id'])('missing %s is reported by name', (field) => {
    const k: Record<string, unknown> = { ...KEY };
    delete k[field];
    expect(named({ keyfile_dict: k }, 'keyfile_dict')!.message).toBe(
      `keyfile_dict missing required field: ${field}`,
    );
  });

  it('several missing fields are listed together', () => {
    expect(named({ keyfile_dict: { type: 'service_account' } }, 'keyfile_dict')!.message).toBe(
      'keyfile_dict missing required fields: client_email, private_key, project_id',
    );
  });

  it('type authorized_user → ok=false, without echoing the type', () => {
    const r = check({ keyfile_dict: { ...KEY, type: 'authorized_user' } });
    expect(r.ok).toBe(false);
    expect(JSON.stringify(r)).not.toContain('authorized_user');
  });

  it('keyfile_dict = 42 → ok=false (and resolution throws)', () => {
    expect(check({ keyfile_dict: 42 }).ok).toBe(false);
    expect(() => resolveGcpConnectionFields({ keyfile_dict: 42 })).toThrow(
      expect.objectContaining({ code: 'LF_GCP_CONN_INVALID' }),
    );
  });

  it('keyfile_dict a string that is not JSON → ok=false, content never echoed', () => {
    const r = check({ keyfile_dict: '{"private_key": "MIIEvQ' });
    expect(r.ok).toBe(false);
    expect(JSON.stringify(r)).not.toContain('MIIEvQ');
  });

  it('keyfile_dict an empty object counts as set (and fails) rather than falling to ADC', () => {
    const r = check({ keyfile_dict: {} });
    expect(r.ok).toBe(false);
    expect(resolveGcpConnectionFields({ keyfile_dict: {} }).source).toBe('keyfile_dict');
  });

  it('a client_email that is not an address is refused, not echoed', () => {
    const r = check({ keyfile_dict: { ...KEY, client_email: 'MIIEvQ secret' } });
    expect(r.ok).toBe(false);
    expect(JSON.stringify(r)).not.toContain('MIIEvQ');
  });
});

describe('keyfile_dict private_key pasted with literal "\\n" pairs', () => {
  const flat = PRIVATE_KEY.replace(/\n/g, '\\n');
  it('the pairs become newlines (as the provider does), in a copy', () => {
    expect(flat).not.toContain('\n');
    const given = { ...KEY, private_key: flat };
    const f = resolveGcpConnectionFields({ keyfile_dict: given });
    expect(f.keyfile_dict!['private_key']).toBe(PRIVATE_KEY);
    expect(given.private_key).toBe(flat);
    expect(check({ keyfile_dict: JSON.stringify(given) }).ok).toBe(true);
  });

  it('a private_key that is no PEM key fails the check naming the field, never echoing it', () => {
    const r = check({ keyfile_dict: { ...KEY, private_key: 'MIIEvQ-garbage' } });
    expect(r.ok).toBe(false);
    expect(
      named({ keyfile_dict: { ...KEY, private_key: 'MIIEvQ-garbage' } }, 'keyfile_dict')!.message,
    ).toMatch(/private_key is not a PEM private key/);
    expect(JSON.stringify(r)).not.toContain('MIIEvQ');
  });
});

describe('T95: key_path and keyless', () => {
  it('only key_path → ok, message mentions the path and runtime validation', () => {
    const m = named({ key_path: '/etc/leoflow/secrets/key.json' }, 'key_path')!;
    expect(m.ok).toBe(true);
    expect(m.message).toContain('/etc/leoflow/secrets/key.json');
    expect(m.message).toMatch(/validated at task runtime/);
  });

  it('a relative key_path is refused (the control plane still does not read it)', () => {
    expect(named({ key_path: 'secrets/key.json' }, 'key_path')!.ok).toBe(false);
  });

  it('empty extra {} → ok, keyless via ADC / Workload Identity', () => {
    const r = check({});
    expect(r.ok).toBe(true);
    expect(named({}, 'adc')!.message).toMatch(/Application Default Credentials/);
    expect(named({}, 'adc')!.message).toMatch(/Workload Identity/);
  });

  it('null extra → keyless too', () => {
    expect(check(null).ok).toBe(true);
    expect(resolveGcpConnectionFields(null).source).toBe('adc');
  });
});

describe('T96: resolution order keyfile_dict → key_path → key_secret_name → ADC', () => {
  const SECRET_NAME = 'projects/p/secrets/sa-key/versions/latest';

  it('keyfile_dict and key_path → keyfile_dict', () => {
    const f = resolveGcpConnectionFields({ keyfile_dict: KEY, key_path: '/k.json' });
    expect(f.source).toBe('keyfile_dict');
    expect(f.keyfile_dict).toEqual(KEY);
    expect(f.key_path).toBeNull();
  });

  it('key_path only → key_path', () => {
    expect(resolveGcpConnectionFields({ key_path: '/k.json' })).toMatchObject({
      source: 'key_path',
      key_path: '/k.json',
    });
  });

  it('key_secret_name only → key_secret_name', () => {
    expect(resolveGcpConnectionFields({ key_secret_name: SECRET_NAME })).toMatchObject({
      source: 'key_secret_name',
      key_secret_name: SECRET_NAME,
    });
  });

  it('key_path and key_secret_name → key_path', () => {
    expect(
      resolveGcpConnectionFields({ key_secret_name: SECRET_NAME, key_path: '/k.json' }).source,
    ).toBe('key_path');
  });

  it('nothing → adc', () => {
    expect(resolveGcpConnectionFields({ project: 'p' })).toEqual({
      source: 'adc',
      project: 'p',
      scopes: [],
      num_retries: 5,
      keyfile_dict: null,
      key_path: null,
      key_secret_name: null,
    });
  });

  it('more than one source set is reported, naming which one wins', () => {
    const m = named(
      { keyfile_dict: KEY, key_path: '/k.json', key_secret_name: SECRET_NAME },
      'credential_source',
    )!;
    expect(m.ok).toBe(true);
    expect(m.message).toMatch(/3 credential sources are set/);
    expect(m.message).toMatch(/keyfile_dict wins/);
  });

  it('key_secret_name is a bare secret name (looked up in the ADC project, as Airflow does) or a projects/*/secrets/* resource name', () => {
    expect(named({ key_secret_name: 'projects/p/secrets/sa-key' }, 'key_secret_name')!.ok).toBe(
      true,
    );
    expect(named({ key_secret_name: SECRET_NAME }, 'key_secret_name')!.ok).toBe(true);
    const bare = named({ key_secret_name: 'sa-key_1' }, 'key_secret_name')!;
    expect(bare.ok).toBe(true);
    expect(bare.message).toMatch(/in the ADC project/);
    expect(resolveGcpConnectionFields({ key_secret_name: 'sa-key' }).key_secret_name).toBe(
      'sa-key',
    );
    for (const bad of ['sa key', 'projects/p/secrets/', 'projects/p/secrets/a/versions/x y']) {
      const c = named({ key_secret_name: bad }, 'key_secret_name')!;
      expect(c.ok).toBe(false);
      expect(c.message).toMatch(/projects\/<project>\/secrets\/<secret>/);
    }
  });
});

describe('T97: legacy extra__google_cloud_platform__<name> only as a fallback', () => {
  const LEGACY = 'extra__google_cloud_platform__';

  it('legacy key_path used when key_path is absent', () => {
    expect(resolveGcpConnectionFields({ [`${LEGACY}key_path`]: '/legacy.json' }).key_path).toBe(
      '/legacy.json',
    );
  });

  it('a short field present but "" or null reads as unset and does NOT fall back to its legacy twin', () => {
    // GoogleBaseHook's get_field: a field cleared in a form must not revive a stale legacy key.
    for (const empty of ['', null]) {
      const f = resolveGcpConnectionFields({
        key_path: empty,
        [`${LEGACY}key_path`]: '/legacy.json',
        project: empty,
        [`${LEGACY}project`]: 'stale-project',
        num_retries: empty,
        [`${LEGACY}num_retries`]: '9',
        keyfile_dict: empty,
        [`${LEGACY}keyfile_dict`]: KEY,
      });
      expect(f).toMatchObject({ source: 'adc', key_path: null, project: null, num_retries: 5 });
      expect(
        named({ key_path: empty, [`${LEGACY}key_path`]: '/legacy.json' }, 'adc'),
      ).toBeDefined();
    }
  });

  it('both set and non-empty → the short name wins', () => {
    expect(
      resolveGcpConnectionFields({ key_path: '/short.json', [`${LEGACY}key_path`]: '/legacy.json' })
        .key_path,
    ).toBe('/short.json');
  });

  it('applies to every field: keyfile_dict, project, scope, num_retries', () => {
    expect(
      resolveGcpConnectionFields({
        [`${LEGACY}keyfile_dict`]: JSON.stringify(KEY),
        [`${LEGACY}project`]: 'legacy-project',
        [`${LEGACY}scope`]: 'https://www.googleapis.com/auth/bigquery',
        [`${LEGACY}num_retries`]: '3',
      }),
    ).toMatchObject({
      source: 'keyfile_dict',
      project: 'legacy-project',
      scopes: ['https://www.googleapis.com/auth/bigquery'],
      num_retries: 3,
    });
  });

  it('a legacy credential field counts as a source in the order check', () => {
    expect(
      resolveGcpConnectionFields({ key_path: '/k.json', [`${LEGACY}keyfile_dict`]: KEY }).source,
    ).toBe('keyfile_dict');
  });
});

describe('T98: scopes, project', () => {
  it('scopes "a, b,,c " → [a, b, c]', () => {
    expect(resolveGcpConnectionFields({ scopes: 'a, b,,c ' }).scopes).toEqual(['a', 'b', 'c']);
  });

  it('scopes as a list [a, b] → [a, b]', () => {
    expect(resolveGcpConnectionFields({ scopes: ['a', 'b'] }).scopes).toEqual(['a', 'b']);
  });

  it('the scope alias is honoured; scopes wins over scope', () => {
    expect(resolveGcpConnectionFields({ scope: 'x,y' }).scopes).toEqual(['x', 'y']);
    expect(resolveGcpConnectionFields({ scope: 'x', scopes: ['z'] }).scopes).toEqual(['z']);
  });

  it('project absent → the key file’s project_id', () => {
    expect(resolveGcpConnectionFields({ keyfile_dict: KEY }).project).toBe('p');
    expect(named({ keyfile_dict: KEY }, 'project')!.message).toMatch(/key file's project_id/);
  });

  it('project wins over the key file; project_id is an alias', () => {
    expect(resolveGcpConnectionFields({ keyfile_dict: KEY, project: 'q' }).project).toBe('q');
    expect(resolveGcpConnectionFields({ project_id: 'r' }).project).toBe('r');
  });

  it('no project anywhere → null (detected from ADC at runtime)', () => {
    expect(resolveGcpConnectionFields({}).project).toBeNull();
  });

  it('scopes are validated as URLs by the check (not by resolution)', () => {
    const good = named(
      {
        scopes:
          'https://www.googleapis.com/auth/cloud-platform, https://www.googleapis.com/auth/bigquery',
      },
      'scopes',
    )!;
    expect(good).toMatchObject({ ok: true, message: '2 scopes (from scopes)' });
    const bad = named(
      { scope: ['https://www.googleapis.com/auth/cloud-platform', 'bigquery'] },
      'scopes',
    )!;
    expect(bad.ok).toBe(false);
    expect(bad.message).toMatch(/entry 2 of 2 is not a URL/);
  });

  it('scopes of the wrong type fail resolution', () => {
    for (const scopes of [42, [1], { a: 'b' }]) {
      expect(() => resolveGcpConnectionFields({ scopes })).toThrow(/scopes must|every entry/);
    }
  });
});

describe('num_retries', () => {
  it('a non-negative integer or digit string; an explicit 0 stays 0', () => {
    expect(resolveGcpConnectionFields({ num_retries: 0 }).num_retries).toBe(0);
    expect(resolveGcpConnectionFields({ num_retries: '0' }).num_retries).toBe(0);
    expect(resolveGcpConnectionFields({ num_retries: ' 7 ' }).num_retries).toBe(7);
  });

  it('missing, null, "" or blank → 5, the Google provider\'s default', () => {
    for (const extra of [{}, { num_retries: null }, { num_retries: '' }, { num_retries: '  ' }]) {
      expect(resolveGcpConnectionFields(extra).num_retries).toBe(5);
    }
    expect(named({}, 'num_retries')!.message).toMatch(/not set: 5/);
  });

  it.each([-1, 1.5, 'five', true])('%j is refused', (num_retries) => {
    expect(check({ num_retries }).ok).toBe(false);
    expect(() => resolveGcpConnectionFields({ num_retries })).toThrow(
      /num_retries must be a non-negative integer/,
    );
  });
});

describe('GCP connections through the generic check', () => {
  it('a recommended keyless connection passes every check', () => {
    const r = check({
      project: 'acme-prod',
      scopes: ['https://www.googleapis.com/auth/cloud-platform'],
      num_retries: 5,
    });
    expect(r.ok).toBe(true);
    expect(r.checks.map((c) => c.name)).toEqual([
      'credential_source',
      'adc',
      'project',
      'scopes',
      'num_retries',
      'uri',
    ]);
  });

  it('extra may be given as stored JSON text', () => {
    expect(check(JSON.stringify({ key_path: '/k.json' })).ok).toBe(true);
  });

  it('a Connection value (extra an object) is accepted as is', () => {
    const c: Connection = { ...gcp(null), extra: { project: 'p' } };
    expect(checkConnectionStructure(c).ok).toBe(true);
  });
});

describe('the project_id alias never hides the provider’s own project field', () => {
  it('an empty project_id leaves a legacy extra__…__project to decide, as the provider reads it', () => {
    const fields = resolveGcpConnectionFields({
      extra__google_cloud_platform__project: 'my-project',
      project_id: '',
      key_path: '/keys/key.json',
    });
    expect(fields.project).toBe('my-project');
  });
  it('project_id fills a project the provider’s fields leave unset', () => {
    expect(resolveGcpConnectionFields({ project_id: 'alias-project' }).project).toBe(
      'alias-project',
    );
  });
});
