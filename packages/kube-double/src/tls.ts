// A throwaway CA and a serving certificate for 127.0.0.1/localhost, made with the openssl CLI
// (Node can sign with a key but cannot issue an X.509 certificate). The CA goes into the kubeconfig
// as certificate-authority-data, so clients verify the server as they verify a real apiserver.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface ServingCertificate {
  caCertificate: string;
  certificate: string;
  key: string;
}

export function createServingCertificate(): ServingCertificate {
  const dir = mkdtempSync(join(tmpdir(), 'kube-double-tls-'));
  const run = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  try {
    run(
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      'ca.key',
      '-out',
      'ca.crt',
      '-days',
      '2',
      '-subj',
      '/CN=kube-double-ca',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    );
    run(
      'req',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      'server.key',
      '-out',
      'server.csr',
      '-subj',
      '/CN=kube-apiserver',
    );
    writeFileSync(
      join(dir, 'server.ext'),
      'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n',
    );
    run(
      'x509',
      '-req',
      '-in',
      'server.csr',
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      'server.crt',
      '-days',
      '2',
      '-extfile',
      'server.ext',
    );
    return {
      caCertificate: readFileSync(join(dir, 'ca.crt'), 'utf8'),
      certificate: readFileSync(join(dir, 'server.crt'), 'utf8'),
      key: readFileSync(join(dir, 'server.key'), 'utf8'),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
