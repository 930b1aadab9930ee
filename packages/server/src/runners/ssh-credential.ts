import { AuthError, type Connection } from '@leoflow/core';
import ssh2 from 'ssh2';

/** The private key the cell signs in with; it lives in memory for the dial only. */
export interface SshPrivateKey {
  privateKey: string;
  passphrase?: string;
}

function invalid(conn_id: string, why: string): AuthError {
  return new AuthError(
    'LF_SSH_CREDENTIAL_INVALID',
    `ssh credential ${conn_id}: ${why}; store the OpenSSH private key as extra.private_key (and its passphrase as extra.private_key_passphrase)`,
    { connection: conn_id },
  );
}

/**
 * An ssh runner's private key from its credential Connection, in the field Airflow's SSH
 * connections use (`extra.private_key`). It is parsed here, so a wrong key or passphrase is
 * refused before any socket opens; no message ever quotes the key or the parser's output.
 */
export function sshPrivateKey(conn_id: string, conn: Connection | undefined): SshPrivateKey {
  if (conn === undefined) {
    throw invalid(conn_id, 'no such Connection in the runner’s tenant (it was deleted?)');
  }
  const key = conn.extra?.private_key;
  if (typeof key !== 'string' || key.trim() === '') {
    throw invalid(conn_id, 'the Connection holds no extra.private_key');
  }
  const pass = conn.extra?.private_key_passphrase;
  const passphrase = typeof pass === 'string' && pass !== '' ? pass : undefined;
  const parsed = ssh2.utils.parseKey(key, passphrase);
  if (parsed instanceof Error || Array.isArray(parsed) || !parsed.isPrivateKey()) {
    throw invalid(
      conn_id,
      passphrase === undefined
        ? 'extra.private_key is not an unencrypted private key ssh2 can read (encrypted keys need extra.private_key_passphrase)'
        : 'extra.private_key cannot be opened with extra.private_key_passphrase',
    );
  }
  return passphrase === undefined ? { privateKey: key } : { privateKey: key, passphrase };
}
