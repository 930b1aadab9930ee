import { createHash } from 'node:crypto';
import type { Duplex, Readable } from 'node:stream';
import { AuthError, type Connection } from '@leoflow/core';
import type { Logger } from 'pino';
import ssh2 from 'ssh2';
import type { RunnerRecord } from '../store/directory-types.js';
import { sshPrivateKey } from './ssh-credential.js';
import {
  describePin,
  hostKeyAlgorithms,
  hostKeyFingerprint,
  matchesPin,
  pinnedHostKey,
  type PinnedHostKey,
} from './ssh-host-key.js';

/** What runs on the machine once the cell is in. */
export type SshRunnerLaunch =
  /**
   * the runner bundle, one self-contained file (the agent's dist/leoflow-agent.cjs: the .mjs entry
   * beside it loads that file from its own directory, so it cannot travel alone): uploaded once
   * per content hash into `dir` (default ~/.leoflow), then run as `node <bundle> --stdio [args…]`
   */
  | {
      kind: 'bundle';
      content: Buffer;
      /** how node must load it (default commonjs): the remote file's extension says so */
      moduleType?: 'commonjs' | 'module';
      dir?: string;
      args?: readonly string[];
    }
  /** a fixed command (tests; a machine that has the daemon installed) */
  | { kind: 'command'; command: string };

export interface SshRunnerDialerDeps {
  /** the runner's credential Connection, opened from its tenant's vault */
  connection: (tenant_id: string, conn_id: string) => Promise<Connection | undefined>;
  launch: SshRunnerLaunch;
  logger: Pick<Logger, 'info' | 'warn'>;
  /** TCP connect + key exchange + authentication (default 15 s) */
  handshakeTimeoutMs?: number;
  /** each remote command starting (and the upload finishing; default 30 s) */
  commandTimeoutMs?: number;
  /** SSH keepalives on an open session (default 15 s; 3 missed end it) */
  keepaliveIntervalMs?: number;
}

/** The remote command's stdio, which the runner protocol rides on. */
export interface SshRunnerChannel {
  /** writes reach the remote command's stdin; reads are its stdout */
  stdio: Duplex;
  /** the remote command's stderr (diagnostics; never protocol) */
  stderr: Readable;
  /** the remote command ended (code, or the signal it died of), or the connection dropped */
  exited: Promise<{ code: number | null; signal: string | null }>;
  /** hangs up: the remote command loses its stdin and the connection closes */
  close(): void;
}

export type SshRunner = Pick<RunnerRecord, 'id' | 'tenant_id' | 'name' | 'ssh'>;

const REMOTE_DIR = '.leoflow';
const SAFE_PATH = /^[A-Za-z0-9._/-]+$/;

/** Single-quotes a word for the remote POSIX shell. */
export function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/**
 * Dials ssh runners: the cell connects to the machine with the key from the runner's credential
 * Connection, accepts the server only if it shows the host key pinned at registration (checked
 * during key exchange, before the key signs anything), starts the runner there and hands back
 * the remote command's stdio. The machine is given nothing Leoflow could be impersonated with:
 * the SSH key stays in the cell, and the per-attempt tokens travel in-band on the protocol.
 * Logs name the runner, host and fingerprints; never the key, never the stream's bytes.
 */
export class SshRunnerDialer {
  readonly #handshakeMs: number;
  readonly #commandMs: number;
  readonly #keepaliveMs: number;
  /** where the bundle goes on the machine (content-addressed), when the launch is the bundle */
  readonly #bundle: { dir: string; path: string; content: Buffer } | null;

  constructor(private readonly deps: SshRunnerDialerDeps) {
    this.#handshakeMs = deps.handshakeTimeoutMs ?? 15_000;
    this.#commandMs = deps.commandTimeoutMs ?? 30_000;
    this.#keepaliveMs = deps.keepaliveIntervalMs ?? 15_000;
    if (deps.launch.kind === 'bundle') {
      const dir = (deps.launch.dir ?? REMOTE_DIR).replace(/\/+$/, '');
      if (!SAFE_PATH.test(dir)) throw new Error(`remote bundle dir ${dir}: use a-z 0-9 . _ / -`);
      const hash = createHash('sha256').update(deps.launch.content).digest('hex');
      const ext = deps.launch.moduleType === 'module' ? 'mjs' : 'cjs';
      const path = `${dir}/runner-${hash.slice(0, 24)}.${ext}`;
      this.#bundle = { dir, path, content: deps.launch.content };
    } else {
      this.#bundle = null;
    }
  }

  async dial(runner: SshRunner): Promise<SshRunnerChannel> {
    const target = runner.ssh;
    if (target === null) {
      throw new AuthError('LF_RUNNER_INVALID', `runner ${runner.name} is not an ssh runner`, {
        name: runner.name,
      });
    }
    const key = sshPrivateKey(
      target.credential,
      await this.deps.connection(runner.tenant_id, target.credential),
    );
    const pin = pinnedHostKey(target.host_key);
    const where = `${target.user}@${target.host}:${target.port}`;
    const log = { runner: runner.name, runner_id: runner.id, ssh: where };
    const client = await this.#connect(runner.name, where, pin, {
      host: target.host,
      port: target.port,
      username: target.user,
      ...key,
    }).catch((e: unknown) => {
      this.deps.logger.warn(
        {
          ...log,
          code: e instanceof AuthError ? e.code : 'LF_SSH_UNREACHABLE',
          error: e instanceof Error ? e.message : String(e),
        },
        'ssh runner dial refused',
      );
      throw e;
    });
    try {
      if (this.#bundle !== null) await this.#upload(client, runner.name, this.#bundle);
      const command =
        this.deps.launch.kind === 'command'
          ? this.deps.launch.command
          : [
              'exec node',
              shellQuote(this.#bundle?.path ?? ''),
              '--stdio',
              ...(this.deps.launch.args ?? []).map(shellQuote),
            ].join(' ');
      const channel = await this.#exec(client, runner.name, command);
      this.deps.logger.info(log, 'ssh runner session open');
      return this.#session(client, channel, log);
    } catch (e) {
      client.end();
      throw e;
    }
  }

  #connect(
    name: string,
    where: string,
    pin: PinnedHostKey,
    cfg: { host: string; port: number; username: string; privateKey: string; passphrase?: string },
  ): Promise<ssh2.Client> {
    const client = new ssh2.Client();
    let presented: string | null = null;
    const algorithms = hostKeyAlgorithms(pin);
    return new Promise((resolve, reject) => {
      let settled = false;
      client.once('ready', () => {
        settled = true;
        resolve(client);
      });
      // `on`, not `once`: a refused client can still emit (its socket closing later), and an
      // error without a listener would crash the cell. After ready, the session listens.
      client.on('error', (err: Error & { level?: string }) => {
        if (settled) return;
        settled = true;
        client.end();
        if (presented !== null) {
          reject(
            new AuthError(
              'LF_SSH_HOST_KEY_MISMATCH',
              `runner ${name}: ${where} presented host key ${presented}, not the pinned ${describePin(pin)}; refused before authenticating, nothing ran. If the machine was re-keyed on purpose, delete the runner and register it again with the new key`,
              { runner: name, presented },
            ),
          );
        } else if (err.level === 'client-authentication') {
          reject(
            new AuthError(
              'LF_SSH_AUTH_REFUSED',
              `runner ${name}: ${where} refused the credential's key; add its public key to that user's authorized_keys`,
              { runner: name },
            ),
          );
        } else {
          reject(
            new AuthError(
              'LF_SSH_UNREACHABLE',
              `runner ${name}: cannot reach ${where} over SSH (${err.level === 'client-timeout' ? `no handshake within ${this.#handshakeMs} ms` : err.message})`,
              { runner: name },
            ),
          );
        }
      });
      client.connect({
        ...cfg,
        readyTimeout: this.#handshakeMs,
        keepaliveInterval: this.#keepaliveMs,
        keepaliveCountMax: 3,
        // Key authentication only: no agent, no password, no keyboard prompts.
        tryKeyboard: false,
        ...(algorithms ? { algorithms: { serverHostKey: algorithms as never } } : {}),
        hostVerifier: (blob: Buffer) => {
          if (matchesPin(pin, blob)) return true;
          presented = hostKeyFingerprint(blob);
          return false;
        },
      });
    });
  }

  #exec(client: ssh2.Client, name: string, command: string): Promise<ssh2.ClientChannel> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new AuthError(
              'LF_SSH_COMMAND_FAILED',
              `runner ${name}: the machine did not start the runner within ${this.#commandMs} ms`,
              { runner: name },
            ),
          ),
        this.#commandMs,
      );
      client.exec(command, (err, channel) => {
        clearTimeout(timer);
        if (err) {
          reject(
            new AuthError(
              'LF_SSH_COMMAND_FAILED',
              `runner ${name}: the machine refused to run the runner (${err.message})`,
              { runner: name },
            ),
          );
        } else resolve(channel);
      });
    });
  }

  /** Puts the bundle at its content-addressed path unless it is already there. */
  async #upload(
    client: ssh2.Client,
    name: string,
    { dir, path, content }: { dir: string; path: string; content: Buffer },
  ): Promise<void> {
    const p = shellQuote(path);
    const script = `umask 077 && mkdir -p ${shellQuote(dir)} && if [ -f ${p} ]; then exit 0; fi && cat > ${p}.part && mv ${p}.part ${p}`;
    const channel = await this.#exec(client, name, script);
    const stderr: Buffer[] = [];
    channel.stderr.on('data', (b: Buffer) => stderr.push(b));
    channel.on('data', () => undefined);
    const code = await new Promise<number | null>((resolve) => {
      channel.once('exit', (c: number | null) => resolve(c));
      channel.once('close', () => resolve(null));
      channel.end(content);
    });
    if (code !== 0) {
      throw new AuthError(
        'LF_SSH_COMMAND_FAILED',
        `runner ${name}: could not place the runner bundle at ${path} (exit ${code}): ${Buffer.concat(stderr).toString('utf8').trim().slice(0, 500)}`,
        { runner: name },
      );
    }
  }

  #session(
    client: ssh2.Client,
    channel: ssh2.ClientChannel,
    log: Record<string, string>,
  ): SshRunnerChannel {
    const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => {
      let status: { code: number | null; signal: string | null } = { code: null, signal: null };
      channel.once('exit', (code: number | null, signal?: string) => {
        status = { code: code ?? null, signal: signal ?? null };
      });
      channel.once('close', () => {
        client.end();
        this.deps.logger.info({ ...log, ...status }, 'ssh runner session closed');
        resolve(status);
      });
      client.once('close', () => resolve(status));
    });
    client.on('error', (err: Error) => {
      this.deps.logger.warn({ ...log, error: err.message }, 'ssh runner connection failed');
      (channel as Duplex).destroy(err);
    });
    return {
      stdio: channel,
      stderr: channel.stderr,
      exited,
      close: () => {
        channel.close();
        client.end();
      },
    };
  }
}
