import { DEFAULT_UID_LOCK_DIR_PATH, type SandboxPlan } from '../executor/sandbox-plan.js';
import { resolveSandboxPlan } from '../executor/sandbox-plan.js';
import { isLeoflowError, parseUidRange, type UidRange } from '@leoflow/core';
import type { SectionContext } from './findings.js';
import type { SandboxPosture } from './types.js';
import { errorText } from './facts.js';

/**
 * Doctor section: the attempt sandbox (docs/security.md, "The sandbox") — which mode is in force
 * (namespaces, the per-uid fallback, none), each exposure it leaves, the world-writable dirs
 * found on this host, and other installations on this host whose uid range overlaps this one.
 * Asked only when the deps can probe the helper (the real machine); tests of other sections
 * leave it out.
 */
export async function sandboxSection(ctx: SectionContext): Promise<SandboxPosture | null> {
  const { cfg, deps, check, expose } = ctx;
  if (!deps.sandboxPlan) return null;
  let plan: SandboxPlan;
  try {
    plan = deps.sandboxPlan(cfg.subprocess);
  } catch (err) {
    check(
      'tasks.sandbox',
      'fail',
      `${isLeoflowError(err) ? err.message : errorText(err)}; standalone refuses to start`,
    );
    return {
      mode: 'unknown',
      isolation: cfg.subprocess.isolation,
      network: cfg.subprocess.network,
      helper: null,
      landlock: false,
      world_writable: [],
      why: isLeoflowError(err) ? err.message : errorText(err),
    };
  }
  if (plan.mode === 'namespaces') {
    check(
      'tasks.sandbox',
      'ok',
      `every attempt runs in its own mount, IPC, PID and UTS namespaces${plan.network === 'none' ? ' and an empty network namespace' : ''}, with a private tmpfs on ${plan.worldWritable.join(', ')}, the rest read-only, no_new_privs, a fresh session keyring, only fds 0-2${plan.landlock ? ', Landlock scoping of abstract sockets and signals' : ''} (${plan.helper})`,
    );
  } else if (plan.mode === 'uid') {
    check(
      'tasks.sandbox',
      'warn',
      `PER-UID FALLBACK, no namespaces: ${plan.why ?? ''}; attempts are kept apart by their uids only, and what they leave in ${plan.worldWritable.join(', ')} is swept as the uid at release`,
    );
  } else {
    check(
      'tasks.sandbox',
      'warn',
      'no sandbox: the control plane is not root, so there are no per-attempt uids and no namespaces; every attempt runs as this user',
    );
  }
  if (!plan.scanComplete && plan.helper)
    check(
      'tasks.world_writable_scan',
      'warn',
      'the scan for world-writable directories stopped at its limit; some may not be private to attempts',
    );
  for (const [i, e] of plan.exposures.entries()) {
    expose(
      `tasks.sandbox.${i + 1}`,
      e,
      plan.mode === 'namespaces'
        ? 'Set execution.network none where attempts need no network; see docs/security.md for what remains.'
        : 'Run the control plane as root on a host that allows namespaces (CAP_SYS_ADMIN), with the sandbox helper built (gcc, libc6-dev, npm run build), and execution.isolation auto or required.',
    );
  }
  await overlapCheck(ctx);
  return {
    mode: plan.mode,
    isolation: plan.isolation,
    network: plan.network,
    helper: plan.helper,
    landlock: plan.landlock,
    world_writable: plan.worldWritable,
    why: plan.why,
  };
}

/** Other installations on this host noted their ranges in the lock dir (attempt-uid.ts). */
async function overlapCheck(ctx: SectionContext): Promise<void> {
  const { cfg, deps, check } = ctx;
  const mine = cfg.subprocess.attemptUidRange;
  if (mine === null || deps.uid !== 0 || !deps.listDir) return;
  let range: UidRange;
  try {
    range = parseUidRange(mine);
  } catch {
    return;
  }
  const dir = `${DEFAULT_UID_LOCK_DIR_PATH}/ranges`;
  const names = (await deps.listDir(dir)) ?? [];
  const overlapping: string[] = [];
  for (const name of names) {
    const text = (await deps.readText(`${dir}/${name}`))?.trim();
    if (!text) continue;
    let r: UidRange;
    try {
      r = parseUidRange(text);
    } catch {
      continue;
    }
    const same = r.first === range.first && r.last === range.last;
    if (r.first <= range.last && r.last >= range.first && !(same && names.length === 1))
      overlapping.push(`${name} (${text})`);
  }
  if (overlapping.length > 1 || (overlapping.length === 1 && !overlapping[0]!.includes(mine)))
    check(
      'tasks.attempt_uid_overlap',
      'warn',
      `other installations on this host allocate from overlapping uid ranges: ${overlapping.join(', ')}; their claims are shared (never one uid twice), but they compete for the same uids — give each installation a range of its own (--attempt-uid-range)`,
    );
}

export { resolveSandboxPlan };
