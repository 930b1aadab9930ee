// The scheduler: binds each pending pod to a Ready node whose labels satisfy the pod's
// nodeSelector and whose allocatable CPU and memory still hold the pod's requests; a pod that fits
// nowhere gets PodScheduled=False, reason Unschedulable, with the scheduler's kind of message, and
// is retried whenever a node or a pod changes.
import { rfc3339 } from './clock.js';
import type { KubeApiServer } from './apiserver.js';
import type { Node, Pod } from './objects.js';
import { bytes, milliCpu } from './quantity.js';

function requests(pod: Pod): { cpu: number; memory: number } {
  let cpu = 0;
  let memory = 0;
  for (const container of pod.spec.containers) {
    const declared = container.resources?.requests ?? container.resources?.limits ?? {};
    cpu += milliCpu(declared.cpu);
    memory += bytes(declared.memory);
  }
  return { cpu, memory };
}

function isReady(node: Node): boolean {
  return (node.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
}

export class Scheduler {
  private pending = false;
  private readonly unsubscribe: () => void;

  constructor(private readonly api: KubeApiServer) {
    this.unsubscribe = api.store.watchFrom(api.store.currentRevision(), (event) => {
      if (event.resourceType.resource === 'pods' || event.resourceType.resource === 'nodes')
        this.soon();
    });
  }

  stop(): void {
    this.unsubscribe();
  }

  private soon(): void {
    if (this.pending) return;
    this.pending = true;
    setImmediate(() => {
      this.pending = false;
      this.schedulePending();
    });
  }

  schedulePending(): void {
    const podType = this.api.type('', 'pods');
    const nodes = this.api.store.list(this.api.type('', 'nodes')) as Node[];
    const pods = this.api.store.list(podType) as Pod[];
    for (const pod of pods) {
      if (pod.spec.nodeName !== undefined || pod.metadata.deletionTimestamp !== undefined) continue;
      if ((pod.spec.schedulerName ?? 'default-scheduler') !== 'default-scheduler') continue;
      const wanted = requests(pod);
      const reasons = new Map<string, number>();
      const note = (reason: string) => reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
      const fit = nodes.find((node) => {
        const name = node.metadata.name ?? '';
        if (!isReady(node))
          return (note('node(s) had untolerated taint {node.kubernetes.io/not-ready: }'), false);
        if (node.spec?.unschedulable) return (note('node(s) were unschedulable'), false);
        const labels = node.metadata.labels ?? {};
        const selector = pod.spec.nodeSelector ?? {};
        if (!Object.entries(selector).every(([key, value]) => labels[key] === value)) {
          return (note("node(s) didn't match Pod's node affinity/selector"), false);
        }
        let usedCpu = 0;
        let usedMemory = 0;
        for (const other of pods) {
          if (other.spec.nodeName !== name) continue;
          if (other.status?.phase === 'Succeeded' || other.status?.phase === 'Failed') continue;
          const used = requests(other);
          usedCpu += used.cpu;
          usedMemory += used.memory;
        }
        const allocatable = node.status?.allocatable ?? {};
        let fits = true;
        if (allocatable.cpu !== undefined && usedCpu + wanted.cpu > milliCpu(allocatable.cpu)) {
          note('Insufficient cpu');
          fits = false;
        }
        if (
          allocatable.memory !== undefined &&
          usedMemory + wanted.memory > bytes(allocatable.memory)
        ) {
          note('Insufficient memory');
          fits = false;
        }
        return fits;
      });
      if (fit !== undefined) {
        this.api.bindPod(pod, fit.metadata.name ?? '');
        continue;
      }
      const detail = [...reasons.entries()]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([reason, count]) => `${count} ${reason}`)
        .join(', ');
      const message =
        nodes.length === 0
          ? 'no nodes available to schedule pods'
          : `0/${nodes.length} nodes are available: ${detail}. preemption: 0/${nodes.length} nodes are available: ${nodes.length} Preemption is not helpful for scheduling.`;
      const existing = (pod.status?.conditions ?? []).find((c) => c.type === 'PodScheduled');
      if (existing?.reason === 'Unschedulable' && existing.message === message) continue;
      const status = pod.status ?? {};
      status.conditions = [
        ...(status.conditions ?? []).filter((c) => c.type !== 'PodScheduled'),
        {
          type: 'PodScheduled',
          status: 'False',
          reason: 'Unschedulable',
          message,
          lastProbeTime: null,
          lastTransitionTime: rfc3339(this.api.clock.now()),
        },
      ];
      pod.status = status;
      pod.metadata.resourceVersion = '';
      this.api.store.update(podType, pod);
    }
  }
}
