import { randomBytes } from 'node:crypto';
import { isActive, type Clock } from '@leoflow/core';
import type { AttemptIdentity } from '../../auth/agent-token.js';
import type { AttemptCredentialSource } from '../../attempts/attempt-launch.js';
import type { TaskInstanceStore } from '../../store/ports/task-instances.js';

/** How long a worker has to ack an assignment before it goes back to the queue. */
export const DEFAULT_ACK_TIMEOUT_MS = 30_000;

/** An attempt waiting for a worker: the executor's side of the hand-over. */
export interface WaitingAttempt {
  identity: AttemptIdentity & { dispatch_gen: number };
  /** every one of these must be a label of the worker (same value) */
  labels: Readonly<Record<string, string>>;
  /** minted at hand-over, so the token's life starts when a worker has it */
  credential: AttemptCredentialSource;
  heartbeatIntervalMs: number;
}

/** What the broker pushes to a worker (the AwaitAssignment stream turns it into messages). */
export type WorkerEvent =
  | {
      kind: 'assignment';
      assignment_id: string;
      attempt_token: string;
      identity: WaitingAttempt['identity'];
      ack_deadline_ms: number;
      heartbeat_interval_ms: number;
    }
  | { kind: 'cancellation'; assignment_id: string; reason: string };

/**
 * Something that takes attempts: a runner session, a warm pod. The broker knows nothing of
 * which; it matches on tenant, labels and free slots only.
 */
export interface AssignmentWorker {
  readonly id: string;
  readonly tenant_id: string;
  /**
   * It takes attempts of every tenant (the host agent: the control plane's own child, in a
   * broker of its own that only Lite's host executor feeds). A runner or warm pod never sets it.
   */
  readonly anyTenant?: boolean;
  readonly labels: Readonly<Record<string, string>>;
  /** attempts it may hold at once on this stream */
  readonly slots: number;
  send(event: WorkerEvent): void;
  /** its ack was accepted: the attempt runs on it now */
  acked?(identity: WaitingAttempt['identity']): void;
  /** an acked attempt left it (ended, cancelled, or the worker detached) */
  released?(identity: WaitingAttempt['identity']): void;
  /** it let an assignment's ack deadline pass (the attempt went back to the queue) */
  unacked?(identity: WaitingAttempt['identity']): void;
}

/**
 * Gives a requeued attempt a new dispatch generation in the store (the fence its token
 * carries), so the token minted for the assignment that was not acked is refused from now on.
 * Answers the new generation, or null when the row moved on (it ended, or another dispatch
 * superseded it): then nothing is handed out again.
 */
export type Refence = (identity: WaitingAttempt['identity']) => Promise<number | null>;

export type AckOutcome =
  { accepted: true } | { accepted: false; reason: 'unknown' | 'expired' | 'not-this-attempt' };

interface Held {
  assignment_id: string;
  attempt: WaitingAttempt;
  worker: AssignmentWorker;
  /** epoch ms; null once acked */
  ack_deadline: number | null;
}

function servesTenant(worker: AssignmentWorker, tenant_id: string): boolean {
  return worker.anyTenant === true || worker.tenant_id === tenant_id;
}

function attemptKey(task_instance_id: string, try_number: number): string {
  return `${task_instance_id}#${try_number}`;
}

/**
 * The queue of attempts waiting for a worker, and what each worker holds. In memory: a restart
 * forgets it, and the executor then answers `gone` for its claims so the scheduler resets them
 * (docs/runners.md, "Attempts on a runner").
 */
export class AssignmentBroker {
  readonly #waiting: WaitingAttempt[] = [];
  readonly #workers = new Map<string, { worker: AssignmentWorker; held: Set<string> }>();
  /** by assignment id */
  readonly #held = new Map<string, Held>();
  /** attempt key → assignment id */
  readonly #byAttempt = new Map<string, string>();
  readonly #ackTimeoutMs: number;
  readonly #onMintError: (err: unknown) => void;
  readonly #refence: Refence | null;
  readonly #onRefenceError: (err: unknown) => void;
  /**
   * waiting attempts whose new generation is being written: not handed out until it is; each
   * with the write's outcome (the generation the store confirmed, or null)
   */
  readonly #fencing = new Map<WaitingAttempt, Promise<number | null>>();
  #matching = false;
  #again = false;

  constructor(
    private readonly clock: Clock,
    opts: {
      ackTimeoutMs?: number;
      onMintError?: (err: unknown) => void;
      /**
       * the store's side of a requeue (executor/assignments/requeue-fence.ts). Without it a requeued
       * attempt keeps its generation and the earlier token stays valid until its exp: only
       * unit tests that never look at tokens leave it out.
       */
      refence?: Refence;
      onRefenceError?: (err: unknown) => void;
    } = {},
  ) {
    this.#ackTimeoutMs = opts.ackTimeoutMs ?? DEFAULT_ACK_TIMEOUT_MS;
    this.#onMintError = opts.onMintError ?? (() => undefined);
    this.#refence = opts.refence ?? null;
    this.#onRefenceError = opts.onRefenceError ?? (() => undefined);
  }

  enqueue(attempt: WaitingAttempt): void {
    this.#waiting.push(attempt);
    this.#match();
  }

  /** A worker is ready; it is handed attempts up to its slots. Returns its detach. */
  attach(worker: AssignmentWorker): () => void {
    this.#workers.set(worker.id, { worker, held: new Set() });
    this.#match();
    return () => this.#detach(worker.id);
  }

  /**
   * The worker took the assignment: acked with that attempt's own token (its claims), before
   * the deadline. An ack after the deadline finds the attempt back in the queue, or with
   * another worker, and is refused.
   */
  ack(assignment_id: string, claims: AttemptIdentity & { dispatch_gen: number }): AckOutcome {
    const h = this.#held.get(assignment_id);
    if (!h) return { accepted: false, reason: 'unknown' };
    const id = h.attempt.identity;
    if (
      id.task_instance_id !== claims.task_instance_id ||
      id.try_number !== claims.try_number ||
      id.dispatch_gen !== claims.dispatch_gen ||
      id.tenant_id !== claims.tenant_id
    ) {
      return { accepted: false, reason: 'not-this-attempt' };
    }
    if (h.ack_deadline !== null && this.clock.now() >= h.ack_deadline) {
      this.#requeue(h, 'the ack came after its deadline');
      this.#match();
      return { accepted: false, reason: 'expired' };
    }
    h.ack_deadline = null;
    h.worker.acked?.(id);
    return { accepted: true };
  }

  /** Unacked assignments past their deadline go back to the front of the queue. */
  expireUnacked(): number {
    const now = this.clock.now();
    const late = [...this.#held.values()].filter(
      (h) => h.ack_deadline !== null && now >= h.ack_deadline,
    );
    for (const h of late) this.#requeue(h, 'not acked before its deadline');
    if (late.length > 0) this.#match();
    return late.length;
  }

  /**
   * Terminate or revoke: a waiting attempt leaves the queue; a held one is cancelled on its
   * worker (pushed now, not at its next heartbeat). What it was: so the executor knows whether
   * an agent exists that will report. A waiting attempt whose requeue fence is still being
   * written has `settled`: its identity under the generation the store holds once that write has
   * landed. The end an executor reports for it must carry that generation, or the lifecycle
   * drops it as stale (null: no write in flight, its identity stands).
   */
  cancel(
    task_instance_id: string,
    try_number: number,
    reason: string,
  ):
    | {
        was: 'waiting';
        attempt: WaitingAttempt;
        settled: Promise<WaitingAttempt['identity']> | null;
      }
    | { was: 'held' | 'none' } {
    const key = attemptKey(task_instance_id, try_number);
    const i = this.#waiting.findIndex(
      (a) => attemptKey(a.identity.task_instance_id, a.identity.try_number) === key,
    );
    if (i >= 0) {
      const attempt = this.#waiting.splice(i, 1)[0]!;
      const fencing = this.#fencing.get(attempt);
      const settled = fencing
        ? fencing.then((gen) =>
            gen === null ? attempt.identity : { ...attempt.identity, dispatch_gen: gen },
          )
        : null;
      return { was: 'waiting', attempt, settled };
    }
    const aid = this.#byAttempt.get(key);
    const h = aid === undefined ? undefined : this.#held.get(aid);
    if (!h) return { was: 'none' };
    this.#drop(h);
    h.worker.send({ kind: 'cancellation', assignment_id: h.assignment_id, reason });
    this.#match();
    return { was: 'held' };
  }

  /** The attempt ended (its report landed, or it was reaped): its slot is free again. */
  release(task_instance_id: string, try_number: number): boolean {
    const aid = this.#byAttempt.get(attemptKey(task_instance_id, try_number));
    const h = aid === undefined ? undefined : this.#held.get(aid);
    if (!h) return false;
    this.#drop(h);
    this.#match();
    return true;
  }

  /**
   * Frees the slot of every held attempt whose row has ended, or moved to another try or
   * dispatch generation: the store is the truth, and an end can reach it by a path that never
   * tells the broker (a reap, a report through another replica). Returns how many it freed.
   */
  async releaseEnded(store: Pick<TaskInstanceStore, 'getAttemptFence'>): Promise<number> {
    let freed = 0;
    for (const id of this.heldAttempts()) {
      const fence = await store.getAttemptFence(id.task_instance_id);
      if (
        !fence ||
        fence.try_number !== id.try_number ||
        fence.dispatch_gen !== id.dispatch_gen ||
        !isActive(fence.state)
      ) {
        if (this.release(id.task_instance_id, id.try_number)) freed++;
      }
    }
    return freed;
  }

  /** Where an attempt is: waiting for a worker, assigned but not acked, or acked (running). */
  stateOf(
    task_instance_id: string,
    try_number: number,
  ): 'waiting' | 'assigned' | 'acked' | undefined {
    const key = attemptKey(task_instance_id, try_number);
    if (
      this.#waiting.some(
        (a) => attemptKey(a.identity.task_instance_id, a.identity.try_number) === key,
      )
    ) {
      return 'waiting';
    }
    const aid = this.#byAttempt.get(key);
    const h = aid === undefined ? undefined : this.#held.get(aid);
    if (!h) return undefined;
    return h.ack_deadline === null ? 'acked' : 'assigned';
  }

  /** Attempts waiting with a confirmed generation (none whose requeue fence is being written). */
  waitingAttempts(): WaitingAttempt[] {
    return this.#waiting.filter((a) => !this.#fencing.has(a));
  }

  /** Attempts held on workers (assigned or acked), by attempt key. */
  heldAttempts(): Array<WaitingAttempt['identity']> {
    return [...this.#held.values()].map((h) => h.attempt.identity);
  }

  /** Some attached worker would take this attempt now (a free slot, its tenant and labels). */
  hasFreeWorkerFor(tenant_id: string, labels: Readonly<Record<string, string>>): boolean {
    return this.#freeWorkerFor(tenant_id, labels) !== undefined;
  }

  /** Some attached worker matches this attempt's tenant and labels, free or busy. */
  hasWorkerFor(tenant_id: string, labels: Readonly<Record<string, string>>): boolean {
    for (const w of this.#workers.values()) {
      if (!servesTenant(w.worker, tenant_id)) continue;
      if (Object.entries(labels).every(([k, v]) => w.worker.labels[k] === v)) return true;
    }
    return false;
  }

  get waiting(): number {
    return this.#waiting.length;
  }

  get held(): number {
    return this.#held.size;
  }

  get workers(): number {
    return this.#workers.size;
  }

  /** Drops everything: the control plane is closing. */
  close(): void {
    this.#waiting.length = 0;
    this.#fencing.clear();
    this.#held.clear();
    this.#byAttempt.clear();
    this.#workers.clear();
  }

  /**
   * A worker went away. Its unacked assignments go back to the queue (nobody runs them); the
   * acked ones are left to the attempt lifecycle: their agent may still be running and report
   * through a reconnected session, and if it does not, the agent-lost rule reaps and retries.
   */
  #detach(worker_id: string): void {
    const w = this.#workers.get(worker_id);
    if (!w) return;
    this.#workers.delete(worker_id);
    for (const aid of [...w.held]) {
      const h = this.#held.get(aid);
      if (!h) continue;
      if (h.ack_deadline === null) this.#drop(h);
      else this.#requeue(h);
    }
    this.#match();
  }

  /**
   * Back to the front of the queue. A token may have been minted for the assignment (and sent):
   * unless `minted` is false the attempt waits until the store has given it a new dispatch
   * generation, so that token is refused everywhere (Register, Ack, secrets) while the one
   * minted for the next hand-over carries the new generation.
   */
  #requeue(h: Held, cancelReason?: string, minted = true): void {
    this.#drop(h);
    if (cancelReason !== undefined) {
      h.worker.send({ kind: 'cancellation', assignment_id: h.assignment_id, reason: cancelReason });
    }
    const attempt = h.attempt;
    this.#waiting.unshift(attempt);
    if (cancelReason !== undefined) h.worker.unacked?.(attempt.identity);
    if (!minted || this.#refence === null) return;
    const confirmed = this.#refence(attempt.identity).then(
      (gen) => {
        this.#fenced(attempt, gen);
        return gen;
      },
      (err: unknown) => {
        // Nothing is handed out with a generation the store did not confirm: the attempt is
        // forgotten, the executor answers `gone` for its claim and the scheduler resets it.
        this.#onRefenceError(err);
        this.#fenced(attempt, null);
        return null;
      },
    );
    this.#fencing.set(attempt, confirmed);
  }

  #fenced(attempt: WaitingAttempt, gen: number | null): void {
    this.#fencing.delete(attempt);
    const i = this.#waiting.indexOf(attempt);
    if (i < 0) return; // cancelled meanwhile
    if (gen === null) {
      this.#waiting.splice(i, 1);
      return;
    }
    this.#waiting[i] = { ...attempt, identity: { ...attempt.identity, dispatch_gen: gen } };
    this.#match();
  }

  #drop(h: Held): void {
    if (!this.#held.delete(h.assignment_id)) return;
    if (h.ack_deadline === null) h.worker.released?.(h.attempt.identity);
    const key = attemptKey(h.attempt.identity.task_instance_id, h.attempt.identity.try_number);
    if (this.#byAttempt.get(key) === h.assignment_id) this.#byAttempt.delete(key);
    this.#workers.get(h.worker.id)?.held.delete(h.assignment_id);
  }

  /** Hands waiting attempts, oldest first, to the first worker with a matching free slot. */
  #match(): void {
    if (this.#matching) {
      this.#again = true;
      return;
    }
    this.#matching = true;
    try {
      do {
        this.#again = false;
        for (let i = 0; i < this.#waiting.length;) {
          const attempt = this.#waiting[i]!;
          const w = this.#fencing.has(attempt)
            ? undefined
            : this.#freeWorkerFor(attempt.identity.tenant_id, attempt.labels);
          if (!w) {
            i += 1;
            continue;
          }
          this.#waiting.splice(i, 1);
          this.#handOver(attempt, w);
        }
      } while (this.#again);
    } finally {
      this.#matching = false;
    }
  }

  #freeWorkerFor(
    tenant_id: string,
    labels: Readonly<Record<string, string>>,
  ): { worker: AssignmentWorker; held: Set<string> } | undefined {
    for (const w of this.#workers.values()) {
      if (!servesTenant(w.worker, tenant_id)) continue;
      if (w.held.size >= w.worker.slots) continue;
      if (!Object.entries(labels).every(([k, v]) => w.worker.labels[k] === v)) continue;
      return w;
    }
    return undefined;
  }

  /**
   * The slot is taken now (synchronously, so two matches never fill one slot); the token is
   * minted right before it is sent. A worker gone while the token was minted puts the attempt
   * back.
   */
  #handOver(attempt: WaitingAttempt, w: { worker: AssignmentWorker; held: Set<string> }): void {
    const assignment_id = `asg_${randomBytes(12).toString('base64url')}`;
    const h: Held = { assignment_id, attempt, worker: w.worker, ack_deadline: Number.MAX_VALUE };
    this.#held.set(assignment_id, h);
    this.#byAttempt.set(
      attemptKey(attempt.identity.task_instance_id, attempt.identity.try_number),
      assignment_id,
    );
    w.held.add(assignment_id);
    attempt.credential.mint({ dispatch_gen: attempt.identity.dispatch_gen }).then(
      (attempt_token) => {
        if (this.#held.get(assignment_id) !== h) return; // cancelled meanwhile
        if (this.#workers.get(w.worker.id) !== w) {
          this.#requeue(h);
          this.#match();
          return;
        }
        const ack_deadline = this.clock.now() + this.#ackTimeoutMs;
        h.ack_deadline = ack_deadline;
        w.worker.send({
          kind: 'assignment',
          assignment_id,
          attempt_token,
          identity: attempt.identity,
          ack_deadline_ms: ack_deadline,
          heartbeat_interval_ms: attempt.heartbeatIntervalMs,
        });
      },
      (err: unknown) => {
        this.#onMintError(err);
        if (this.#held.get(assignment_id) === h) {
          this.#requeue(h, undefined, false);
        }
      },
    );
  }
}
