import { parseDuration } from '@leoflow/core';

/** Reports one problem of the config file, by its dotted key. */
export type Problem = (key: string, message: string) => void;

/** A value as a problem's message quotes it. */
export function show(v: unknown): string {
  return typeof v === 'string' ? `"${v}"` : JSON.stringify(v);
}

/**
 * Typed reads of one mapping of the config file's `executor:` section (the Kubernetes
 * executor, a tenant, a warm pool). A value that is absent takes its fallback; a value of the
 * wrong shape is reported by its dotted key and takes its fallback too, so every problem of the
 * file is collected in one pass.
 */
export class SectionReader {
  /** false once any read here was reported */
  ok = true;

  constructor(
    private readonly raw: Record<string, unknown>,
    readonly base: string,
    private readonly report: Problem,
  ) {}

  problem(key: string, message: string): void {
    this.ok = false;
    this.report(key, message);
  }

  has(key: string): boolean {
    return this.raw[key] !== undefined && this.raw[key] !== null;
  }

  string(key: string, required: boolean): string | null {
    const v = this.raw[key];
    const at = `${this.base}.${key}`;
    if (v === undefined || v === null) {
      if (required) this.problem(at, `${at} is required`);
      return null;
    }
    if (typeof v !== 'string' || v.trim() === '') {
      this.problem(at, `${at} is ${show(v)}; set it to a non-empty string`);
      return null;
    }
    return v.trim();
  }

  int(key: string, fallback: number, min: number): number {
    const v = this.raw[key];
    if (v === undefined || v === null) return fallback;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min) {
      const at = `${this.base}.${key}`;
      this.problem(at, `${at} is ${show(v)}; set it to a whole number ≥ ${min}`);
      return fallback;
    }
    return v;
  }

  /** A positive duration, in ms; `example` ends the message (e.g. "5m (how long …)"). */
  positiveDurationMs(key: string, fallbackMs: number, example: string): number {
    const v = this.raw[key];
    if (v === undefined || v === null) return fallbackMs;
    const at = `${this.base}.${key}`;
    let seconds = NaN;
    try {
      seconds = parseDuration(v, at);
    } catch {
      // reported below
    }
    if (Number.isFinite(seconds) && seconds > 0) return Math.round(seconds * 1000);
    this.problem(at, `${at} is ${show(v)}; set it to a positive duration such as ${example}`);
    return fallbackMs;
  }

  boolean(key: string, fallback: boolean): boolean {
    const v = this.raw[key];
    if (v === undefined || v === null) return fallback;
    if (typeof v !== 'boolean') {
      const at = `${this.base}.${key}`;
      this.problem(at, `${at} is ${show(v)}; set it to true or false`);
      return fallback;
    }
    return v;
  }
}
