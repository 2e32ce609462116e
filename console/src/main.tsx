/**
 * The web console: signs in, reads who the principal is (`/api/auth/validate`) and what the agent offers
 * (`/api/openapi.json`), then shows the screens that principal may use. Routing is the URL's path (the agent
 * answers index.html for every path outside /api).
 */
import { render } from 'preact';
import { useCallback, useEffect, useMemo, useState } from 'preact/hooks';
import './styles.css';
import 'uplot/dist/uPlot.min.css';
import { call, get, isGlobal, loadDescription, setUnauthorizedHandler, token, type Description, type Principal } from './api.js';
import { Link, PlanDialog, SessionContext, sessionFor, type Session } from './ui.js';
import { Login } from './screens/login.js';
import { Overview } from './screens/overview.js';
import { DeploymentPage } from './screens/deployment.js';
import { Plans } from './screens/plans.js';
import { Templates } from './screens/templates.js';
import { Users } from './screens/users.js';
import { Audit } from './screens/audit.js';
import { Security } from './screens/security.js';
import { Traffic } from './screens/traffic.js';
import { Observability } from './screens/observability.js';
import { Dashboards } from './screens/dashboards.js';
import { Settings, Doctor } from './screens/system.js';

interface Screen {
  path: string;
  label: string;
  /** The read the screen starts with: shown only to principals who may call it. */
  needs: [string, string];
  /** Global state only: never for principals limited to their deployments. */
  global?: boolean;
}

const SCREENS: Screen[] = [
  { path: '/', label: 'Overview', needs: ['GET', '/deployments'] },
  { path: '/plans', label: 'Plans', needs: ['GET', '/plans'] },
  { path: '/templates', label: 'Templates', needs: ['GET', '/templates'], global: true },
  { path: '/users', label: 'Users & keys', needs: ['GET', '/apikeys'] },
  { path: '/audit', label: 'Audit', needs: ['GET', '/audit/events'] },
  { path: '/security', label: 'Security', needs: ['GET', '/security/events'], global: true },
  { path: '/traffic', label: 'Traffic', needs: ['GET', '/traffic/stats'], global: true },
  { path: '/observability', label: 'Observability', needs: ['GET', '/plugin/observability/metrics/host'], global: true },
  { path: '/dashboards', label: 'Dashboards', needs: ['GET', '/dashboards'], global: true },
  { path: '/settings', label: 'Settings', needs: ['GET', '/settings'], global: true },
  { path: '/doctor', label: 'Doctor', needs: ['GET', '/system/doctor'], global: true },
];

function usePath(): [string, (to: string) => void] {
  const [path, setPath] = useState(location.pathname);
  useEffect(() => {
    const onPop = () => setPath(location.pathname);
    addEventListener('popstate', onPop);
    return () => removeEventListener('popstate', onPop);
  }, []);
  const navigate = useCallback((to: string) => {
    if (to !== location.pathname + location.search) history.pushState(null, '', to);
    setPath(location.pathname);
    scrollTo(0, 0);
  }, []);
  return [path, navigate];
}

interface Signed {
  principal: Principal;
  description: Description;
}

function App() {
  const [path, navigate] = usePath();
  const [signed, setSigned] = useState<Signed | null>(null);
  const [checking, setChecking] = useState(Boolean(token.get()));
  const [review, setReview] = useState<{ plan: any; done: (r: { applied: boolean; data?: any }) => void } | null>(null);

  const signOut = useCallback(() => {
    token.clear();
    setSigned(null);
    setChecking(false);
    navigate('/login');
  }, [navigate]);
  useEffect(() => setUnauthorizedHandler(signOut), [signOut]);

  const enter = useCallback(async () => {
    setChecking(true);
    try {
      const [validation, description] = await Promise.all([get<{ principal: Principal }>('/auth/validate'), loadDescription()]);
      setSigned({ principal: validation.principal, description });
      if (location.pathname === '/login') navigate('/');
    } catch {
      token.clear();
      setSigned(null);
    } finally {
      setChecking(false);
    }
  }, [navigate]);
  useEffect(() => {
    if (token.get()) void enter();
  }, [enter]);

  const session: Session | null = useMemo(
    () =>
      signed &&
      sessionFor(signed.principal, signed.description, {
        navigate,
        signOut,
        change: async (method, template, target, body) => {
          const op = signed.description.byRoute.get(`${method} /api${template}`);
          if (!op?.plan) return (await call(method, target, { body })).data;
          const plan = (await call(method, target, { body, query: { plan: 'true' } })).data;
          return new Promise((resolve, reject) =>
            setReview({
              plan,
              done: (r) => {
                setReview(null);
                if (r.applied) resolve(r.data);
                else reject('closed');
              },
            }),
          );
        },
      }),
    [signed, navigate, signOut],
  );

  useEffect(() => {
    const screen = SCREENS.find((s) => s.path === path);
    document.title = `${path.startsWith('/deployments/') ? decodeURIComponent(path.split('/')[2] ?? '') : (screen?.label ?? (session ? 'Not found' : 'Sign in'))} · host agent`;
  }, [path, session]);

  if (checking && !signed) return <p class="muted boot">Loading…</p>;
  if (!session) return <Login onSignedIn={enter} />;

  const visible = SCREENS.filter((s) => session.can(s.needs[0], s.needs[1]) && (!s.global || isGlobal(session.principal)));
  let content;
  const match = /^\/deployments\/([^/]+)\/?$/.exec(path);
  if (match) content = <DeploymentPage name={decodeURIComponent(match[1]!)} />;
  else if (!visible.some((s) => s.path === path)) content = <NotFound path={path} />;
  else if (path === '/') content = <Overview />;
  else if (path === '/plans') content = <Plans />;
  else if (path === '/templates') content = <Templates />;
  else if (path === '/users') content = <Users />;
  else if (path === '/audit') content = <Audit />;
  else if (path === '/security') content = <Security />;
  else if (path === '/traffic') content = <Traffic />;
  else if (path === '/observability') content = <Observability />;
  else if (path === '/dashboards') content = <Dashboards />;
  else if (path === '/settings') content = <Settings />;
  else content = <Doctor />;

  return (
    <SessionContext.Provider value={session}>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <span class="brand">host agent</span>
        <nav aria-label="Screens">
          <ul>
            {visible.map((s) => (
              <li>
                <Link href={s.path} class={s.path === path ? 'current' : ''}>
                  <span aria-current={s.path === path ? 'page' : undefined}>{s.label}</span>
                </Link>
              </li>
            ))}
          </ul>
        </nav>
        <span class="who">
          {session.principal.name}{' '}
          <span class="muted">
            ({session.principal.role}, {session.principal.scope})
          </span>
          <button type="button" class="ghost" onClick={signOut}>
            Sign out
          </button>
        </span>
      </header>
      <main id="main" tabIndex={-1}>
        {content}
      </main>
      {review ? <PlanDialog plan={review.plan} onDone={review.done} /> : null}
    </SessionContext.Provider>
  );
}

function NotFound({ path }: { path: string }) {
  return (
    <>
      <h1>Not here</h1>
      <p>
        Nothing at <code>{path}</code> that you may see. <Link href="/">Back to the overview</Link>
      </p>
    </>
  );
}

render(<App />, document.getElementById('app')!);
