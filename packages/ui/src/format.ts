/** Times in the viewer's zone; the UTC instant goes in the title (hover). */
export function localTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

export function duration(
  start: string | null | undefined,
  end: string | null | undefined,
  now = Date.now(),
): string {
  if (!start) return '—';
  const ms = (end ? Date.parse(end) : now) - Date.parse(start);
  if (!(ms >= 0)) return '—';
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  return `${Math.floor(m / 60)}h ${m % 60}m`;
}

/** A state's CSS class: one colour per state family, also in the legend. */
export function stateClass(state: string | null | undefined): string {
  return `state state-${(state ?? 'none').replace(/[^a-z_]/g, '')}`;
}
