import { createHash, createPrivateKey, X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { createSecureContext } from 'node:tls';
import { ConfigError } from '@leoflow/core';
import { watchDirectories, type DirectoryWatch } from '../util/watch-directories.js';
import type { AgentRpcServer, AgentTls } from './agent-server.js';

/** The operator's certificate files for the agent port (config `agent.tls`). */
export interface AgentTlsFiles {
  certFile: string;
  keyFile: string;
}

/** A pair read from disk and checked, with what the logs and doctor may say about it. */
export interface LoadedAgentTls {
  tls: AgentTls;
  /** SHA-256 of cert ‖ key: "did the files change?" without keeping a second copy around */
  fingerprint: string;
  subject: string;
  notAfter: Date;
}

export interface CertificateExpiry {
  notAfter: Date;
  /** whole days until notAfter, rounded down; negative once expired */
  daysLeft: number;
}

/** Days left on a PEM certificate (the first one in the file: the leaf). */
export function certificateExpiry(certPem: string | Buffer, nowMs: number): CertificateExpiry {
  const notAfter = new Date(new X509Certificate(certPem).validTo);
  return { notAfter, daysLeft: Math.floor((notAfter.getTime() - nowMs) / 86_400_000) };
}

/**
 * Reads the pair and checks it would serve: both parse, the key is the certificate's key, and
 * Node builds a TLS context from them. The error names the files and the reason, never a byte
 * of the key.
 */
export async function loadAgentTls(files: AgentTlsFiles): Promise<LoadedAgentTls> {
  let cert: Buffer;
  let key: Buffer;
  try {
    [cert, key] = await Promise.all([readFile(files.certFile), readFile(files.keyFile)]);
  } catch (err) {
    throw invalid(files, `cannot read it (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(cert);
  } catch {
    throw invalid(files, 'the certificate file holds no PEM certificate');
  }
  try {
    if (!x509.checkPrivateKey(createPrivateKey(key))) {
      throw invalid(files, 'the key is not the certificate’s key (a half-updated pair?)');
    }
    createSecureContext({ cert, key, minVersion: 'TLSv1.2' });
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw invalid(files, 'the key file holds no usable private key');
  }
  return {
    tls: { cert, key },
    fingerprint: createHash('sha256').update(cert).update('\0').update(key).digest('hex'),
    subject: x509.subject.replace(/\n/g, ', '),
    notAfter: new Date(x509.validTo),
  };
}

function invalid(files: AgentTlsFiles, why: string): ConfigError {
  return new ConfigError(
    'LF_AGENT_TLS_INVALID',
    `agent TLS pair ${files.certFile} / ${files.keyFile} cannot be used: ${why}. Provide a ` +
      'matching PEM certificate and key (replace both at once, e.g. a Kubernetes Secret volume).',
    { cert_file: files.certFile, key_file: files.keyFile },
  );
}

export type AgentTlsReloadOutcome = 'applied' | 'unchanged' | 'refused';

export interface AgentTlsReloaderOptions {
  files: AgentTlsFiles;
  /** installs a new pair for connections accepted from now on (AgentRpcServer.setTls) */
  apply: (tls: AgentTls) => void;
  /** a new pair was refused; the one serving stays */
  onError: (err: ConfigError) => void;
  onApplied?: (loaded: LoadedAgentTls) => void;
  /** also re-check this often, for file systems that miss change events; 0 disables */
  pollIntervalMs?: number;
  /** a burst of events (a Secret update writes several entries) settles for this long */
  debounceMs?: number;
}

/**
 * Keeps the agent port serving the operator's current certificate without a restart. It
 * watches the DIRECTORIES holding the files, not the files: a Kubernetes Secret volume updates
 * by writing a new `..<timestamp>` directory and renaming the `..data` symlink over the old one,
 * so the file paths (`tls.crt` → `..data/tls.crt`) never see a write of their own, and a watch
 * on the old inode would go quiet forever after the first swap. Any change in the directory
 * re-reads both files; an unchanged pair is a no-op; a pair that does not load (half written,
 * key and certificate from different pairs) is refused and the serving one stays. Connections
 * already open keep the context they were accepted with.
 */
export class AgentTlsReloader {
  readonly #opts: AgentTlsReloaderOptions;
  #watch: DirectoryWatch | undefined;
  #fingerprint: string | undefined;
  #poll: NodeJS.Timeout | undefined;
  #running: Promise<AgentTlsReloadOutcome> | undefined;
  #again = false;

  constructor(opts: AgentTlsReloaderOptions, initial?: LoadedAgentTls) {
    this.#opts = opts;
    this.#fingerprint = initial?.fingerprint;
  }

  /** Starts watching (and polling, when configured). */
  start(): void {
    const { certFile, keyFile } = this.#opts.files;
    this.#watch = watchDirectories(
      [dirname(certFile), dirname(keyFile)],
      () => void this.reloadNow(),
      {
        debounceMs: this.#opts.debounceMs ?? 200,
        onError: (dir, err) =>
          this.#opts.onError(
            invalid(
              this.#opts.files,
              `its directory ${dir} can no longer be watched (${err.message})`,
            ),
          ),
      },
    );
    const every = this.#opts.pollIntervalMs ?? 0;
    if (every > 0) {
      this.#poll = setInterval(() => void this.reloadNow(), every);
      this.#poll.unref();
    }
  }

  stop(): void {
    this.#watch?.close();
    clearInterval(this.#poll);
  }

  /**
   * Re-reads the pair now and installs it when it changed and loads. Calls overlapping a
   * running one coalesce into one more pass after it, so the last state on disk always wins.
   */
  reloadNow(): Promise<AgentTlsReloadOutcome> {
    if (this.#running) {
      this.#again = true;
      return this.#running;
    }
    const run = (async (): Promise<AgentTlsReloadOutcome> => {
      let outcome: AgentTlsReloadOutcome;
      do {
        this.#again = false;
        outcome = await this.#reloadOnce();
      } while (this.#again);
      return outcome;
    })();
    this.#running = run;
    void run.finally(() => {
      if (this.#running === run) this.#running = undefined;
    });
    return run;
  }

  async #reloadOnce(): Promise<AgentTlsReloadOutcome> {
    let loaded: LoadedAgentTls;
    try {
      loaded = await loadAgentTls(this.#opts.files);
    } catch (err) {
      this.#opts.onError(
        err instanceof ConfigError ? err : invalid(this.#opts.files, 'it could not be loaded'),
      );
      return 'refused';
    }
    if (loaded.fingerprint === this.#fingerprint) return 'unchanged';
    try {
      this.#opts.apply(loaded.tls);
    } catch {
      this.#opts.onError(invalid(this.#opts.files, 'the TLS listener refused it'));
      return 'refused';
    }
    this.#fingerprint = loaded.fingerprint;
    this.#opts.onApplied?.(loaded);
    return 'applied';
  }
}

/** What the wiring needs of a logger (pino's shape). */
interface TlsLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** Below this many days left, every load logs a warning (doctor warns from the same line). */
export const AGENT_CERT_WARN_DAYS = 30;

/**
 * The wiring for a listener: keeps `server` on the files' current pair from `initial` on, and
 * logs what happens (subject and expiry, never key material). Returns the reloader to stop.
 */
export function reloadAgentTlsOnChange(
  server: Pick<AgentRpcServer, 'setTls'>,
  files: AgentTlsFiles,
  initial: LoadedAgentTls,
  logger: TlsLog,
  opts: { pollIntervalMs?: number; now?: () => number } = {},
): AgentTlsReloader {
  const setTls = server.setTls;
  if (setTls === undefined) throw new Error('the agent listener was started without TLS');
  const now = opts.now ?? Date.now;
  const describe = (loaded: LoadedAgentTls) => {
    const { daysLeft } = certificateExpiry(loaded.tls.cert, now());
    const fields = {
      cert_file: files.certFile,
      subject: loaded.subject,
      not_after: loaded.notAfter.toISOString(),
      days_left: daysLeft,
    };
    if (daysLeft < AGENT_CERT_WARN_DAYS)
      logger.warn(fields, `the agent TLS certificate expires in ${daysLeft} day(s); renew it`);
    return fields;
  };
  describe(initial);
  const reloader = new AgentTlsReloader(
    {
      files,
      apply: (tls) => setTls(tls),
      onApplied: (loaded) =>
        logger.info(describe(loaded), 'agent TLS certificate reloaded; new connections use it'),
      onError: (err) =>
        logger.error(
          { code: err.code, ...err.details },
          `${err.message} The agent port keeps serving the previous certificate.`,
        ),
      ...(opts.pollIntervalMs !== undefined ? { pollIntervalMs: opts.pollIntervalMs } : {}),
    },
    initial,
  );
  reloader.start();
  return reloader;
}
