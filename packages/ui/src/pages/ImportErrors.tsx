import { useQuery } from '@tanstack/react-query';
import { Link } from 'react-router';
import { get, type Reply } from '../api';
import { Time } from '../components/Time';
import { useLive } from '../live';
import { ErrorNote } from './Layout';

export type ImportError = Reply<'get_import_errors'>['import_errors'][number];

/** The DAGs folder's files that do not load (issue 40), shared by the banner and the page. */
export function useImportErrors() {
  return useQuery({
    queryKey: ['import-errors'],
    queryFn: () => get<Reply<'get_import_errors'>>('/api/v1/import-errors'),
    refetchInterval: 5000,
  });
}

/** Above the DAG list: how many DAG files do not load, linking to the page that lists them. */
export function ImportErrorsBanner() {
  const errors = useImportErrors();
  const n = errors.data?.import_errors.length ?? 0;
  if (n === 0) return null;
  return (
    <div role="alert" className="error import-errors-banner">
      <p>
        {n === 1 ? '1 DAG file does not load' : `${n} DAG files do not load`}:{' '}
        <Link to="/import-errors">see the import errors</Link> (file, line, column, code and what to
        do). Fix and save: the DAGs folder is watched.
      </p>
    </div>
  );
}

export function ImportErrors() {
  useLive({});
  const errors = useImportErrors();
  if (errors.isError) return <ErrorNote error={errors.error} />;
  const list = errors.data?.import_errors ?? [];
  return (
    <>
      <h1>Import errors</h1>
      <p className="sub">
        DAG files in the DAGs folder that do not load. A DAG whose file breaks keeps its last good
        version until the file loads again; the CLI lists the same with{' '}
        <code>leoflow dags errors</code>.
      </p>
      {errors.isPending ? (
        <p>Loading…</p>
      ) : list.length === 0 ? (
        <p className="empty">No import errors: every DAG file in the DAGs folder loads.</p>
      ) : (
        <table className="list">
          <thead>
            <tr>
              <th scope="col">File</th>
              <th scope="col">Where</th>
              <th scope="col">Code</th>
              <th scope="col">Problem and what to do</th>
              <th scope="col">Since</th>
            </tr>
          </thead>
          <tbody>
            {list.flatMap((e) =>
              e.diagnostics.map((d, i) => (
                <tr key={`${e.file}:${i}`}>
                  <th scope="row">
                    <code>{e.file}</code>
                    {e.dag_id && <div className="sub">DAG {e.dag_id}</div>}
                  </th>
                  <td>
                    <code>
                      {d.file}:{d.line}:{d.column}
                    </code>
                    {d.path && <div className="sub">{d.path}</div>}
                  </td>
                  <td>
                    <code>{d.code}</code>
                  </td>
                  <td>
                    {d.message}
                    <div className="sub">hint: {d.hint}</div>
                  </td>
                  <td>
                    <Time iso={e.first_seen_at} />
                  </td>
                </tr>
              )),
            )}
          </tbody>
        </table>
      )}
    </>
  );
}
