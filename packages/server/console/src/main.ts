/**
 * The operator console: a hash-routed page polling the admin API every 2 s.
 *   #/overview · #/data-sets · #/data-sets/<id> · #/test-events
 * When the API answers 401 (admin token configured, no session yet) a login form asks for the
 * admin token once; POST /api/session then sets the HttpOnly session cookie.
 */
import './styles.css';
import { getJson, login, logout, Unauthorized, type Session } from './api.js';
import { h, replace } from './dom.js';
import { overviewPage } from './overview.js';
import { dataSetsPage } from './data-sets.js';
import { dataSetPage } from './data-set.js';
import { testEventsPage } from './test-events.js';
import type { Page } from './page.js';

const POLL_MS = 2000;
const app = document.getElementById('app')!;
const updated = document.getElementById('updated')!;
const envPill = document.getElementById('env')!;
const logoutButton = document.getElementById('logout') as HTMLButtonElement;

let current: { route: string; page: Page } | null = null;
let timer: number | undefined;
let generation = 0;

function pageFor(route: string): Page {
  const match = /^\/data-sets\/(.+)$/.exec(route);
  if (match) return dataSetPage(decodeURIComponent(match[1]!));
  if (route === '/data-sets') return dataSetsPage();
  if (route === '/test-events') return testEventsPage();
  return overviewPage();
}

function routeOf(): string {
  const hash = location.hash.replace(/^#/, '');
  return hash === '' || hash === '/' ? '/overview' : hash;
}

function showLogin(message?: string): void {
  window.clearTimeout(timer);
  current?.page.destroy();
  current = null;
  const input = h('input', { type: 'password', name: 'token', autocomplete: 'current-password', required: true, 'aria-label': 'Admin token', 'data-testid': 'login-token' });
  const error = h('p', { class: 'error', 'data-testid': 'login-error' }, message ?? '');
  const form = h(
    'form',
    { class: 'login panel', 'data-testid': 'login-form' },
    h('h1', null, 'Sign in'),
    h('p', { class: 'muted' }, 'This admin port requires the admin token (ECAPI_ADMIN_TOKEN). It is sent once; the console then keeps an HttpOnly session cookie.'),
    h('label', null, 'Admin token ', input),
    h('button', { type: 'submit', 'data-testid': 'login-submit' }, 'Sign in'),
    error,
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void login(input.value).then((outcome) => {
      if (outcome === true) void render();
      else showLogin(outcome);
    });
  });
  replace(app, form);
  input.focus();
}

async function tick(gen: number): Promise<void> {
  if (!current || gen !== generation) return;
  try {
    await current.page.refresh();
    if (gen !== generation) return;
    updated.textContent = `updated ${new Date().toLocaleTimeString()}`;
    updated.classList.remove('error');
  } catch (error) {
    if (error instanceof Unauthorized) return showLogin();
    updated.textContent = `update failed: ${(error as Error).message}`;
    updated.classList.add('error');
  }
  if (gen === generation) timer = window.setTimeout(() => void tick(gen), POLL_MS);
}

async function render(): Promise<void> {
  generation++;
  window.clearTimeout(timer);
  const route = routeOf();
  for (const a of document.querySelectorAll<HTMLAnchorElement>('nav a')) {
    const nav = a.dataset.nav!;
    a.classList.toggle('active', route === `/${nav}` || (nav === 'data-sets' && route.startsWith('/data-sets/')));
  }
  current?.page.destroy();
  const page = pageFor(route);
  current = { route, page };
  replace(app, page.element);
  await tick(generation);
}

async function start(): Promise<void> {
  try {
    const session = await getJson<Session>('/api/session');
    logoutButton.hidden = !session.token_required;
  } catch {
    // The page still works; the first data request decides.
  }
  getJson<{ env: string }>('/api/test-events')
    .then((r) => {
      envPill.textContent = r.env;
      envPill.className = `pill ${r.env === 'production' ? 'prod' : 'test'}`;
      document.title = `ecapi-ingest console (${r.env})`;
    })
    .catch(() => undefined);
  logoutButton.addEventListener('click', () => void logout().then(() => showLogin()));
  window.addEventListener('hashchange', () => void render());
  await render();
}

void start();
