import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * A self-signed EC P-256 certificate and key for 127.0.0.1, written by the machine's openssl
 * into `dir` as tls.crt and tls.key (the names a Kubernetes TLS Secret uses).
 */
export function selfSignedPair(
  dir: string,
  opts: { name: string; days?: number },
): { cert: string; key: string } {
  mkdirSync(dir, { recursive: true });
  const [cert, key] = [join(dir, 'tls.crt'), join(dir, 'tls.key')];
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      String(opts.days ?? 90),
      '-subj',
      `/CN=${opts.name}`,
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  return { cert, key };
}
