import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { generateKeyPairSync, createVerify, type KeyObject } from 'node:crypto';

export interface Fake {
  url: string;
  requests: { method: string; url: string; headers: IncomingMessage['headers']; body: string }[];
  close(): Promise<void>;
}

type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;

export async function startFake(handler: Handler): Promise<Fake> {
  const requests: Fake['requests'] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      handler(req, body, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

export function json(
  res: ServerResponse,
  status: number,
  value: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(value));
}

/** A GCE metadata server: the ADC identity. Its tokens are `meta-token`; `project` null: none. */
export function startFakeMetadata(project: string | null = 'adc-project'): Promise<Fake> {
  return startFake((req, _body, res) => {
    const h = { 'metadata-flavor': 'Google' };
    const path = (req.url ?? '').split('?')[0];
    if (req.headers['metadata-flavor'] !== 'Google') return json(res, 403, {}, h);
    if (path === '/computeMetadata/v1/instance' || path === '/computeMetadata/v1/instance/') {
      res.writeHead(200, { ...h, 'content-type': 'text/plain' });
      return res.end('ok');
    }
    if (path === '/computeMetadata/v1/instance/service-accounts/default/token') {
      return json(
        res,
        200,
        { access_token: 'meta-token', expires_in: 3600, token_type: 'Bearer' },
        h,
      );
    }
    if (path === '/computeMetadata/v1/project/project-id' && project !== null) {
      res.writeHead(200, { ...h, 'content-type': 'text/plain' });
      return res.end(project);
    }
    if (path?.startsWith('/computeMetadata/v1/universe')) {
      res.writeHead(404, h);
      return res.end();
    }
    res.writeHead(404, h);
    res.end();
  });
}

/** An OAuth token endpoint for the jwt-bearer grant. Its tokens are `sa-token`. */
export function startFakeTokenEndpoint(): Promise<Fake> {
  return startFake((_req, body, res) => {
    const form = new URLSearchParams(body);
    if (form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:jwt-bearer') {
      return json(res, 400, { error: 'unsupported_grant_type' });
    }
    json(res, 200, { access_token: 'sa-token', expires_in: 3600, token_type: 'Bearer' });
  });
}

export interface TestKey {
  publicKey: KeyObject;
  keyJson: Record<string, string>;
}

/** A throwaway service-account key whose token_uri is `tokenUri`. */
export function makeServiceAccountKey(
  tokenUri: string,
  project = 'key-project',
  email = 'sa@key-project.iam.gserviceaccount.com',
): TestKey {
  const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return {
    publicKey,
    keyJson: {
      type: 'service_account',
      project_id: project,
      private_key_id: 'test-key-id',
      private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      client_email: email,
      client_id: '1',
      token_uri: tokenUri,
    },
  };
}

/** The assertion a token request carried, verified against `publicKey` (throws when it does not verify). */
export function verifiedAssertion(
  body: string,
  publicKey: KeyObject,
): { header: Record<string, unknown>; payload: Record<string, unknown> } {
  const assertion = new URLSearchParams(body).get('assertion');
  if (assertion === null) throw new Error('no assertion in the token request');
  const [h, p, s] = assertion.split('.');
  if (h === undefined || p === undefined || s === undefined) throw new Error('not a JWS');
  const v = createVerify('RSA-SHA256');
  v.update(`${h}.${p}`);
  if (!v.verify(publicKey, Buffer.from(s, 'base64url')))
    throw new Error('signature does not verify with the key');
  return {
    header: JSON.parse(Buffer.from(h, 'base64url').toString('utf8')) as Record<string, unknown>,
    payload: JSON.parse(Buffer.from(p, 'base64url').toString('utf8')) as Record<string, unknown>,
  };
}

export function gcpUri(extra: Record<string, unknown>): string {
  return `google-cloud-platform://?__extra__=${encodeURIComponent(JSON.stringify(extra))}`;
}
