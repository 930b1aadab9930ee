import { stateClass } from '../format';

export function StateBadge({ state }: { state: string | null | undefined }) {
  return <span className={`badge ${stateClass(state)}`}>{state ?? 'none'}</span>;
}
