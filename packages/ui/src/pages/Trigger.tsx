import { useMutation } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { useNavigate, useParams } from 'react-router';
import { api, enc, type Run } from '../api';
import { useCan } from '../session';
import { useDag } from './Dag';
import { ErrorNote } from './Layout';

/** Parses the conf editor: a JSON object, or a message saying what is wrong. */
export function parseConf(text: string): { conf: Record<string, unknown> } | { error: string } {
  if (text.trim() === '') return { conf: {} };
  try {
    const v: unknown = JSON.parse(text);
    if (v === null || typeof v !== 'object' || Array.isArray(v))
      return { error: 'conf must be a JSON object, e.g. {"multiplier": 2}' };
    return { conf: v as Record<string, unknown> };
  } catch (e) {
    return { error: `not valid JSON: ${(e as Error).message}` };
  }
}

export function Trigger() {
  const { dagId = '' } = useParams();
  const can = useCan();
  const navigate = useNavigate();
  const dag = useDag(dagId);
  const [text, setText] = useState<string | null>(null);
  const trigger = useMutation({
    mutationFn: (conf: Record<string, unknown>) =>
      api<Run>('POST', `/api/v1/dags/${enc(dagId)}/runs`, { conf }),
    onSuccess: () => void navigate(`/dags/${enc(dagId)}`),
  });
  if (!can('runs:trigger'))
    return <p>Your role may not trigger runs; ask for a developer or operator token.</p>;
  if (dag.isError) return <ErrorNote error={dag.error} />;
  if (dag.isPending) return <p>Loading…</p>;
  const params = dag.data.spec.params ?? {};
  const value = text ?? JSON.stringify(params, null, 2);
  const parsed = parseConf(value);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if ('conf' in parsed) trigger.mutate(parsed.conf);
  };
  const setParam = (k: string, raw: string, original: unknown) => {
    const base = 'conf' in parsed ? parsed.conf : {};
    const v =
      typeof original === 'number'
        ? Number(raw)
        : typeof original === 'boolean'
          ? raw === 'true'
          : raw;
    setText(JSON.stringify({ ...base, [k]: v }, null, 2));
  };
  return (
    <>
      <h1>Trigger {dagId}</h1>
      <form onSubmit={submit} className="trigger">
        {Object.keys(params).length > 0 && (
          <fieldset>
            <legend>Params</legend>
            {Object.entries(params).map(([k, v]) => {
              const current = 'conf' in parsed ? parsed.conf[k] : v;
              return (
                <label key={k}>
                  <span>{k}</span>
                  <input
                    name={`param-${k}`}
                    type={typeof v === 'number' ? 'number' : 'text'}
                    value={
                      typeof current === 'string' || typeof current === 'number'
                        ? current
                        : JSON.stringify(current)
                    }
                    onChange={(e) => setParam(k, e.target.value, v)}
                  />
                </label>
              );
            })}
          </fieldset>
        )}
        <label htmlFor="conf">Conf (JSON)</label>
        <textarea
          id="conf"
          name="conf"
          rows={10}
          spellCheck={false}
          value={value}
          onChange={(e) => setText(e.target.value)}
          aria-invalid={'error' in parsed}
          aria-describedby="conf-help"
        />
        <p id="conf-help" className={'error' in parsed ? 'error' : 'sub'}>
          {'error' in parsed
            ? parsed.error
            : 'Passed to every task as the run conf; starts from the DAG params.'}
        </p>
        <button type="submit" disabled={'error' in parsed || trigger.isPending}>
          Trigger run
        </button>
      </form>
      {trigger.isError && <ErrorNote error={trigger.error} />}
    </>
  );
}
