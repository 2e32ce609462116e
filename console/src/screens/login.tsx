/** Sign in with a username and password, or with an API key; the token goes to this tab's session storage. */
import { useEffect, useState } from 'preact/hooks';
import { call, get, token } from '../api.js';
import { ErrorBox } from '../ui.js';

export function Login({ onSignedIn }: { onSignedIn: () => void }) {
  const [methods, setMethods] = useState<string[]>(['password', 'api_key']);
  const [mode, setMode] = useState<'password' | 'api_key'>('password');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    get<{ methods: string[] }>('/auth/status').then(
      (s) => setMethods(s.methods),
      () => undefined,
    );
  }, []);
  const submit = async (e: Event) => {
    e.preventDefault();
    const form = new FormData(e.target as HTMLFormElement);
    setBusy(true);
    setError(null);
    try {
      const body = mode === 'password' ? { username: form.get('username'), password: form.get('password') } : { api_key: form.get('api_key') };
      const res = await call<{ token: string }>('POST', '/auth/login', { body });
      token.set(res.data.token);
      onSignedIn();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main id="main" class="login">
      <h1>Sign in to the host agent</h1>
      <form onSubmit={submit} aria-describedby="login-how">
        <fieldset>
          <legend id="login-how">Sign in with</legend>
          {methods.includes('password') ? (
            <label class="inline">
              <input type="radio" name="mode" checked={mode === 'password'} onChange={() => setMode('password')} /> a password
            </label>
          ) : null}
          {methods.includes('api_key') ? (
            <label class="inline">
              <input type="radio" name="mode" checked={mode === 'api_key'} onChange={() => setMode('api_key')} /> an API key
            </label>
          ) : null}
        </fieldset>
        {mode === 'password' ? (
          <>
            <div class="field">
              <label for="username">Username</label>
              <input id="username" name="username" autoComplete="username" required />
            </div>
            <div class="field">
              <label for="password">Password</label>
              <input id="password" name="password" type="password" autoComplete="current-password" required />
            </div>
          </>
        ) : (
          <div class="field">
            <label for="api_key">API key</label>
            <input id="api_key" name="api_key" type="password" autoComplete="off" required />
          </div>
        )}
        <ErrorBox error={error} />
        <button type="submit" class="primary" disabled={busy}>
          Sign in
        </button>
      </form>
    </main>
  );
}
