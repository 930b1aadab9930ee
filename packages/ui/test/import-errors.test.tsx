// @vitest-environment happy-dom
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { act } from 'react';
import { createRoot, type Root } from 'react-dom/client';
import { createMemoryRouter, RouterProvider } from 'react-router';
import { afterEach, describe, expect, it } from 'vitest';
import { ImportErrorsBanner, type ImportError } from '../src/pages/ImportErrors';

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

let root: Root | null = null;
let host: HTMLElement | null = null;
afterEach(() => {
  act(() => root?.unmount());
  host?.remove();
  root = null;
});

/** The banner over a query cache that already holds the API's answer (no request is made). */
function renderBanner(errors: ImportError[]): HTMLElement {
  const qc = new QueryClient({ defaultOptions: { queries: { staleTime: Infinity } } });
  qc.setQueryData(['import-errors'], { import_errors: errors });
  host = document.createElement('div');
  document.body.appendChild(host);
  const router = createMemoryRouter([{ path: '*', element: <ImportErrorsBanner /> }]);
  act(() => {
    root = createRoot(host as HTMLElement);
    root.render(
      <QueryClientProvider client={qc}>
        <RouterProvider router={router} />
      </QueryClientProvider>,
    );
  });
  return host;
}

const broken = (file: string): ImportError => ({
  file,
  dag_id: null,
  diagnostics: [
    {
      code: 'LF_DAG_CYCLE',
      message: 'a cycle',
      file,
      line: 5,
      column: 7,
      path: 'tasks[0].depends_on[0]',
      hint: 'remove one edge',
    },
  ],
  first_seen_at: '2026-12-07T10:00:00.000Z',
  updated_at: '2026-12-07T10:00:00.000Z',
});

describe('the import errors banner (issue 40)', () => {
  it('says nothing when every DAG file loads', () => {
    expect(renderBanner([]).textContent).toBe('');
  });

  it('counts the files that do not load and links to the page that lists them', () => {
    const el = renderBanner([broken('a/leoflow.yaml'), broken('b/leoflow.yaml')]);
    expect(el.querySelector('[role="alert"]')?.textContent).toContain('2 DAG files do not load');
    expect(el.querySelector('a')?.getAttribute('href')).toBe('/import-errors');
  });
});
