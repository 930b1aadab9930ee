import { localTime } from '../format';

/** A time in the viewer's zone, with the UTC instant on hover. */
export function Time({ iso }: { iso: string | null | undefined }) {
  if (!iso) return <span>—</span>;
  return (
    <time dateTime={iso} title={`${new Date(iso).toISOString()} (UTC)`}>
      {localTime(iso)}
    </time>
  );
}
