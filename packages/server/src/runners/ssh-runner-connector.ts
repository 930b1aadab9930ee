import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { SshRunner, SshRunnerChannel, SshRunnerDialer } from './ssh-dialer.js';

/** Who a dialed session belongs to, as the cell's session server needs it. */
export interface SshSessionIdentity {
  runner_id: string;
  tenant_id: string;
}

export interface SshRunnerConnectorDeps {
  dialer: Pick<SshRunnerDialer, 'dial'>;
  /** runs the runner protocol (the agent service over HTTP/2) on a dialed channel */
  serve: (identity: SshSessionIdentity, stream: Duplex) => void;
  /** live sessions by runner (runners/runner-sessions.ts): deleting the runner closes its session */
  sessions: { add(runner_id: string, session: { close(): void }): () => void };
  /** the ssh runners this cell keeps connected (its tenants'); polled every refreshMs */
  runners: () => Promise<SshRunner[]>;
  logger: Pick<Logger, 'info' | 'warn'>;
  /** how often the list is read again (default 30 s) */
  refreshMs?: number;
  /** wait before redial n (0-based) after a failed dial or an ended session */
  backoffMs?: (n: number) => number;
}

/** 1 s doubling to 5 min, each with up to a quarter of jitter, so many runners do not redial in step. */
function defaultBackoff(n: number): number {
  const base = Math.min(300_000, 1_000 * 2 ** Math.min(n, 9));
  return base - Math.floor(Math.random() * (base / 4));
}

interface Link {
  runner: SshRunner;
  channel: SshRunnerChannel | null;
  timer: NodeJS.Timeout | null;
  failures: number;
  stopped: boolean;
}

/**
 * Keeps a session open to every ssh runner the cell serves: where an inbound runner dials the
 * door, the cell dials an ssh runner (SshRunnerDialer) and serves the runner protocol on the
 * channel, so the runner waits for assignments exactly as an inbound one does. A session that
 * ends, or a dial that fails, is retried with backoff; a runner that leaves the list or is
 * deleted is hung up on and not dialed again.
 */
export class SshRunnerConnector {
  readonly #links = new Map<string, Link>();
  readonly #backoff: (n: number) => number;
  #poll: NodeJS.Timeout | null = null;
  #closed = false;

  constructor(private readonly deps: SshRunnerConnectorDeps) {
    this.#backoff = deps.backoffMs ?? defaultBackoff;
  }

  /** Reads the list now and then every refreshMs. */
  async start(): Promise<void> {
    await this.refresh();
    if (this.#closed) return;
    this.#poll = setInterval(() => void this.refresh(), this.deps.refreshMs ?? 30_000);
    this.#poll.unref();
  }

  /** Dials runners that joined the list, hangs up on those that left it. */
  async refresh(): Promise<void> {
    let wanted: SshRunner[];
    try {
      wanted = await this.deps.runners();
    } catch (err) {
      this.deps.logger.warn(
        { error: err instanceof Error ? err.message : String(err) },
        'listing ssh runners failed; keeping the current sessions',
      );
      return;
    }
    if (this.#closed) return;
    const ids = new Set(wanted.map((r) => r.id));
    for (const id of [...this.#links.keys()]) if (!ids.has(id)) this.#stop(id);
    for (const r of wanted) {
      if (r.ssh === null || this.#links.has(r.id)) continue;
      const link: Link = { runner: r, channel: null, timer: null, failures: 0, stopped: false };
      this.#links.set(r.id, link);
      void this.#dial(link);
    }
  }

  /** Whether the runner's session is open now. */
  connected(runner_id: string): boolean {
    return this.#links.get(runner_id)?.channel != null;
  }

  close(): void {
    this.#closed = true;
    if (this.#poll) clearInterval(this.#poll);
    for (const id of [...this.#links.keys()]) this.#stop(id);
  }

  async #dial(link: Link): Promise<void> {
    link.timer = null;
    let channel: SshRunnerChannel;
    try {
      channel = await this.deps.dialer.dial(link.runner);
    } catch {
      // The dialer logged the refusal with its code; try again later.
      this.#retry(link);
      return;
    }
    if (link.stopped) {
      channel.close();
      return;
    }
    link.channel = channel;
    link.failures = 0;
    const remove = this.deps.sessions.add(link.runner.id, {
      close: () => this.#stop(link.runner.id),
    });
    channel.stdio.on('error', () => channel.close());
    this.deps.serve({ runner_id: link.runner.id, tenant_id: link.runner.tenant_id }, channel.stdio);
    const ended = await channel.exited;
    remove();
    link.channel = null;
    if (!link.stopped) {
      this.deps.logger.warn(
        { runner: link.runner.name, runner_id: link.runner.id, ...ended },
        'ssh runner session ended; dialing again',
      );
      this.#retry(link);
    }
  }

  #retry(link: Link): void {
    if (link.stopped) return;
    const wait = this.#backoff(link.failures++);
    link.timer = setTimeout(() => void this.#dial(link), wait);
    link.timer.unref();
  }

  #stop(runner_id: string): void {
    const link = this.#links.get(runner_id);
    if (!link) return;
    this.#links.delete(runner_id);
    link.stopped = true;
    if (link.timer) clearTimeout(link.timer);
    link.channel?.close();
  }
}
