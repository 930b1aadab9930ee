import { useQueryClient } from '@tanstack/react-query';
import { useEffect, useRef, useState, type FormEvent } from 'react';
import { useNavigate } from 'react-router';
import { api, ApiError } from '../api';

/**
 * Exchanges an API token (pasted once) or standalone's one-time code for an HttpOnly session
 * cookie. The token goes to the server in one request and is never stored by the page.
 */
export function SignIn() {
  const navigate = useNavigate();
  const qc = useQueryClient();
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const tried = useRef(false);

  const exchange = async (body: { token: string } | { code: string }) => {
    setBusy(true);
    setError(null);
    try {
      await api('POST', '/api/ui/session', body);
      qc.clear();
      void navigate('/', { replace: true });
    } catch (e) {
      setError(e instanceof ApiError ? e.message : 'the server could not be reached');
    } finally {
      setBusy(false);
    }
  };

  useEffect(() => {
    const m = /^#code=([A-Za-z0-9_-]+)$/.exec(window.location.hash);
    if (!m?.[1] || tried.current) return;
    tried.current = true;
    // The code is single-use: take it out of the address bar and history at once.
    window.history.replaceState(null, '', '/sign-in');
    void exchange({ code: m[1] });
  });

  const submit = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const input = e.currentTarget.elements.namedItem('token') as HTMLInputElement;
    const token = input.value.trim();
    input.value = '';
    if (token) void exchange({ token });
  };

  return (
    <main className="page signin">
      <h1>Sign in to Leoflow</h1>
      <p>
        Paste an API token (standalone writes an admin token to{' '}
        <code>&lt;data-dir&gt;/admin.token</code>; mint others with{' '}
        <code>leoflow auth create-token</code>), or open the one-time sign-in link standalone prints
        at start.
      </p>
      <form onSubmit={submit}>
        <label htmlFor="token">API token</label>
        <input
          id="token"
          name="token"
          type="password"
          autoComplete="off"
          spellCheck={false}
          required
        />
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
    </main>
  );
}
