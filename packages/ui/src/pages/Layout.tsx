import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect } from 'react';
import { Link, NavLink, Outlet, useNavigate } from 'react-router';
import { api, ApiError, get, setSignedOutHandler, type Whoami } from '../api';
import { SessionProvider } from '../session';

export function Layout() {
  const navigate = useNavigate();
  const qc = useQueryClient();
  useEffect(() => {
    setSignedOutHandler(() => {
      qc.clear();
      void navigate('/sign-in', { replace: true });
    });
  }, [navigate, qc]);
  const me = useQuery({ queryKey: ['whoami'], queryFn: () => get<Whoami>('/api/v1/whoami') });
  if (me.isPending) return <main className="page">Loading…</main>;
  if (me.isError) {
    return (
      <main className="page">
        <h1>Not signed in</h1>
        <p>
          {me.error instanceof ApiError ? me.error.message : 'The server could not be reached.'}{' '}
          <Link to="/sign-in">Sign in</Link>.
        </p>
      </main>
    );
  }
  const can = (p: string) => me.data.permissions.includes(p);
  const signOut = async () => {
    await api('DELETE', '/api/ui/session').catch(() => undefined);
    qc.clear();
    void navigate('/sign-in', { replace: true });
  };
  return (
    <SessionProvider me={me.data}>
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="top">
        <Link to="/" className="brand">
          Leoflow
        </Link>
        <nav aria-label="main">
          <NavLink to="/" end>
            DAGs
          </NavLink>
          {can('variables:read') && <NavLink to="/variables">Variables</NavLink>}
          {can('connections:read') && <NavLink to="/connections">Connections</NavLink>}
          {can('runners:read') && <NavLink to="/fleet">Runners</NavLink>}
          {can('audit:read') && <NavLink to="/audit">Audit</NavLink>}
          {can('tokens:read') && <NavLink to="/tokens">Tokens</NavLink>}
          {can('doctor:read') && <NavLink to="/doctor">Doctor</NavLink>}
          {can('tenants:admin') && <NavLink to="/tenants">Tenants</NavLink>}
        </nav>
        <span className="who" title={`tenant ${me.data.tenant_id}`}>
          {me.data.subject} · {me.data.role}
        </span>
        <button type="button" onClick={() => void signOut()}>
          Sign out
        </button>
      </header>
      <main id="main" className="page">
        <Outlet />
      </main>
    </SessionProvider>
  );
}

/** What to do about a failed request, by its status: every error names a next step. */
export function errorHint(status: number | null): string {
  if (status === null) return 'The server could not be reached: check that it runs, then reload.';
  if (status === 401) return 'Your session ended: sign in again.';
  if (status === 403)
    return 'Your role may not do this: ask an admin for a token whose role has the permission.';
  if (status === 404)
    return 'It does not exist (any more): check the address, or go back to the DAGs.';
  if (status === 409) return 'It changed meanwhile: reload the page and try again.';
  if (status >= 500) return "The server failed: retry, and if it persists read the server's log.";
  return 'Correct the request and try again.';
}

export function ErrorNote({ error }: { error: unknown }) {
  const status = error instanceof ApiError ? error.status : null;
  const msg = error instanceof ApiError ? `${error.message} (${error.code})` : String(error);
  return (
    <div role="alert" className="error">
      <p>{msg}</p>
      <p className="hint">
        {errorHint(status)}
        {status === 404 && (
          <>
            {' '}
            <Link to="/">DAGs</Link>
          </>
        )}
      </p>
    </div>
  );
}

export function NotFound() {
  return (
    <>
      <h1>Page not found</h1>
      <p>
        There is no page at this address. Go back to the <Link to="/">DAGs</Link>.
      </p>
    </>
  );
}
