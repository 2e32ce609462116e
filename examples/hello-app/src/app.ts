/**
 * The hello-app process: a plain node:http server. Every request must carry the principal header the core signs;
 * notes are persisted in the app's data folder, so they survive restarts.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { readFileSync, writeFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { WebSocketServer } from 'ws';
import { appEnvironment, onAgentGone, verifyPrincipal } from '@agent/sdk/app';
import type { Principal } from '@agent/sdk';

interface Note {
  id: number;
  text: string;
  deployment: string;
}

const env = appEnvironment();
const file = join(env.dataDir, 'notes.json');
let notes: Note[] = [];
try {
  notes = JSON.parse(readFileSync(file, 'utf8')) as Note[];
} catch {
  notes = [];
}
const save = () => {
  writeFileSync(`${file}.tmp`, JSON.stringify(notes));
  renameSync(`${file}.tmp`, file);
};

const send = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
};

const readBody = async (req: IncomingMessage): Promise<unknown> => {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : {};
};

async function handle(req: IncomingMessage, res: ServerResponse, principal: Principal): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://app');
  const route = `${req.method} ${url.pathname}`;
  if (route === 'GET /whoami') return send(res, 200, { data: principal.toJSON() });
  if (route === 'GET /notes') return send(res, 200, { data: notes.filter((n) => principal.canAccessDeployment(n.deployment)) });
  if (route === 'POST /notes') {
    const body = (await readBody(req)) as { text?: unknown; deployment?: unknown };
    if (typeof body.text !== 'string' || typeof body.deployment !== 'string')
      return send(res, 400, { error: 'text and deployment are required', code: 'VALIDATION_FAILED' });
    if (!principal.canAccessDeployment(body.deployment, 'write'))
      return send(res, 404, { error: `deployment '${body.deployment}' not found`, code: 'NOT_FOUND' });
    const note: Note = { id: (notes.at(-1)?.id ?? 0) + 1, text: body.text, deployment: body.deployment };
    notes.push(note);
    save();
    return send(res, 201, { data: note });
  }
  const one = /^GET \/notes\/(\d+)$/.exec(route);
  if (one) {
    const note = notes.find((n) => n.id === Number(one[1]) && principal.canAccessDeployment(n.deployment));
    return note ? send(res, 200, { data: note }) : send(res, 404, { error: 'note not found', code: 'NOT_FOUND' });
  }
  if (route === 'GET /agent') {
    const answer = await fetch(`${env.agentUrl}/api/auth/validate`, { headers: { authorization: `Bearer ${env.agentToken}` } });
    return send(res, 200, { data: ((await answer.json()) as { data: unknown }).data });
  }
  if (route === 'POST /crash') {
    send(res, 200, { data: { exiting: true } });
    setTimeout(() => process.exit(3), 20);
    return;
  }
  send(res, 404, { error: 'no such route', code: 'NOT_FOUND' });
}

const server = createServer((req, res) => {
  verifyPrincipal(req.headers, env)
    .then((principal) => handle(req, res, principal))
    .catch((err: unknown) => {
      if (!res.headersSent) send(res, 401, { error: `not authenticated by the agent: ${(err as Error).message}`, code: 'UNAUTHORIZED' });
    });
});

const wss = new WebSocketServer({ noServer: true });
server.on('upgrade', (req, socket, head) => {
  verifyPrincipal(req.headers, env)
    .then((principal) => {
      wss.handleUpgrade(req, socket, head, (ws) => {
        ws.send(JSON.stringify({ hello: principal.name }));
        ws.on('message', (data) => ws.send(JSON.stringify({ echo: data.toString() })));
      });
    })
    .catch(() => socket.end('HTTP/1.1 401 Unauthorized\r\n\r\n'));
});

server.listen(env.port, env.host);
process.on('SIGTERM', () => server.close(() => process.exit(0)));
// Never outlive the agent (a kill -9 of the agent gives no SIGTERM).
onAgentGone(() => process.exit(0));
