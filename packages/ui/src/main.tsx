import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { createBrowserRouter, RouterProvider } from 'react-router';
import { ApiError } from './api';
import { Audit, Tokens } from './pages/Admin';
import { Dag } from './pages/Dag';
import { Dags } from './pages/Dags';
import { ImportErrors } from './pages/ImportErrors';
import { Layout, NotFound } from './pages/Layout';
import { Doctor, Tenants } from './pages/Platform';
import { Run } from './pages/Run';
import { RunnerDetail, Runners } from './pages/Runners';
import { SignIn } from './pages/SignIn';
import { Task } from './pages/Task';
import { Trigger } from './pages/Trigger';
import { Versions } from './pages/Versions';
import { Connections, Variables } from './pages/Vault';
import './styles.css';

const queryClient = new QueryClient({
  defaultOptions: {
    queries: {
      // Freshness comes from the live stream, not from polling or refocus storms.
      staleTime: 30_000,
      refetchOnWindowFocus: false,
      retry: (n, e) => !(e instanceof ApiError && e.status < 500) && n < 2,
    },
  },
});

// Every view is a route, so every URL can be shared.
const router = createBrowserRouter([
  { path: '/sign-in', element: <SignIn /> },
  {
    path: '/',
    element: <Layout />,
    children: [
      { index: true, element: <Dags /> },
      { path: 'import-errors', element: <ImportErrors /> },
      { path: 'dags/:dagId', element: <Dag /> },
      { path: 'dags/:dagId/trigger', element: <Trigger /> },
      { path: 'dags/:dagId/versions', element: <Versions /> },
      { path: 'dags/:dagId/runs/:runId', element: <Run /> },
      { path: 'dags/:dagId/runs/:runId/tasks/:taskId', element: <Task /> },
      { path: 'variables', element: <Variables /> },
      { path: 'connections', element: <Connections /> },
      // Runners live at /fleet: /runners/ belongs to the door alone, and the server never answers a page there.
      { path: 'fleet', element: <Runners /> },
      { path: 'fleet/:name', element: <RunnerDetail /> },
      { path: 'tokens', element: <Tokens /> },
      { path: 'audit', element: <Audit /> },
      { path: 'doctor', element: <Doctor /> },
      { path: 'tenants', element: <Tenants /> },
      { path: '*', element: <NotFound /> },
    ],
  },
]);

const root = document.getElementById('root');
if (root) {
  createRoot(root).render(
    <StrictMode>
      <QueryClientProvider client={queryClient}>
        <RouterProvider router={router} />
      </QueryClientProvider>
    </StrictMode>,
  );
}
