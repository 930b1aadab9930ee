import { describe, expect, it } from 'vitest';
import { parseLabels, runnerRegistration, type RunnerFormFields } from '../src/runner-input';

const base: RunnerFormFields = {
  name: 'gpu-box',
  kind: 'inbound',
  labels: '',
  capacity: '',
  host: '',
  port: '',
  user: '',
  credential: '',
  host_key: '',
};

describe('the runner register form', () => {
  it('reads labels as the CLI does (k=v, comma-separated) and names a malformed pair', () => {
    expect(parseLabels(' gpu=a100, zone = lab ,')).toEqual({ gpu: 'a100', zone: 'lab' });
    expect(parseLabels('')).toEqual({});
    expect(parseLabels('gpu')).toBe('labels: "gpu" is not key=value');
    expect(parseLabels('=x')).toBe('labels: "=x" is not key=value');
  });

  it('sends ssh details only for an ssh runner, with the CLI defaults for capacity and port', () => {
    expect(runnerRegistration({ ...base, host: 'ignored' })).toEqual({
      name: 'gpu-box',
      kind: 'inbound',
      labels: {},
      capacity: 1,
    });
    expect(
      runnerRegistration({
        ...base,
        kind: 'ssh',
        host: '10.0.0.7',
        user: 'leoflow',
        credential: 'key',
        host_key: ' SHA256:x \n',
      }),
    ).toEqual({
      name: 'gpu-box',
      kind: 'ssh',
      labels: {},
      capacity: 1,
      ssh: { host: '10.0.0.7', port: 22, user: 'leoflow', credential: 'key', host_key: 'SHA256:x' },
    });
    expect(runnerRegistration({ ...base, capacity: '2.5' })).toMatch(/^capacity/);
    expect(runnerRegistration({ ...base, kind: 'ssh', port: 'abc' })).toMatch(/^ssh port/);
  });
});
