import { useQueryClient } from '@tanstack/react-query';
import { useEffect, useRef } from 'react';
import type { LogLine } from './api';

export interface LiveOptions {
  dagId?: string;
  /** a mapped task's instance: its map index too */
  follow?: { dagId: string; runId: string; taskId: string; tryNumber: number; mapIndex?: number };
  onLog?: (tryNumber: number, lines: LogLine[]) => void;
  onLogEnd?: (tryNumber: number) => void;
}

/**
 * ONE server-sent-events stream per page. Change events name a run (or "the DAG list"); the page
 * refetches just that through the REST API, so a grid of 25 runs costs one request per run that
 * changed, not 25 a second. A log-following page gets the try's new lines on the same stream.
 */
export function useLive(opts: LiveOptions): void {
  const qc = useQueryClient();
  const handlers = useRef(opts);
  handlers.current = opts;
  const { dagId, follow } = opts;
  const key = follow
    ? `dag_id=${encodeURIComponent(follow.dagId)}&run_id=${encodeURIComponent(follow.runId)}&task_id=${encodeURIComponent(follow.taskId)}&try=${follow.tryNumber}${follow.mapIndex !== undefined && follow.mapIndex >= 0 ? `&map_index=${follow.mapIndex}` : ''}`
    : dagId
      ? `dag_id=${encodeURIComponent(dagId)}`
      : '';

  useEffect(() => {
    if (typeof EventSource === 'undefined') return;
    const es = new EventSource(`/api/ui/events${key ? `?${key}` : ''}`);
    es.addEventListener('run', (ev) => {
      const e = JSON.parse((ev as MessageEvent<string>).data) as { dag_id: string; run_id: string };
      void qc.invalidateQueries({ queryKey: ['run', e.dag_id, e.run_id] });
      void qc.invalidateQueries({ queryKey: ['runs'] });
    });
    es.addEventListener('dags', () => void qc.invalidateQueries({ queryKey: ['dags'] }));
    es.addEventListener('log', (ev) => {
      const e = JSON.parse((ev as MessageEvent<string>).data) as {
        try_number: number;
        lines: LogLine[];
      };
      handlers.current.onLog?.(e.try_number, e.lines);
    });
    es.addEventListener('log-end', (ev) => {
      const e = JSON.parse((ev as MessageEvent<string>).data) as { try_number: number };
      handlers.current.onLogEnd?.(e.try_number);
    });
    es.addEventListener('signed-out', () => {
      es.close();
      window.location.assign('/sign-in');
    });
    return () => es.close();
  }, [key, qc]);
}
