/** What a launch command hands the daemon: the door's runner base URL, with the token in it. */
export interface DoorUrl {
  /** ws(s)://<door>/runners/<token>/session */
  sessionUrl: string;
  /** the same URL with the token replaced, for messages */
  redacted: string;
}

const RUNNER_PATH = /^\/runners\/([A-Za-z0-9_-]{8,200})\/$/;

export class DoorUrlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DoorUrlError';
  }
}

/**
 * Parses `https://<door>/runners/<token>/` (http:// too, for a door on loopback). The token is
 * never echoed: every error names the redacted form.
 */
export function parseDoorUrl(text: string): DoorUrl {
  const raw = text.trim();
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new DoorUrlError(
      'the runner URL is not a URL; give the line the registration printed (https://<door>/runners/<token>/)',
    );
  }
  const m = RUNNER_PATH.exec(u.pathname);
  if (
    (u.protocol !== 'https:' && u.protocol !== 'http:') ||
    !m ||
    u.search !== '' ||
    u.hash !== ''
  ) {
    throw new DoorUrlError(
      `the runner URL must be https://<door>/runners/<token>/ (got ${redact(u)}); give the line the registration printed`,
    );
  }
  const ws = u.protocol === 'https:' ? 'wss:' : 'ws:';
  return {
    sessionUrl: `${ws}//${u.host}/runners/${m[1]}/session`,
    redacted: `${u.protocol}//${u.host}/runners/<redacted>/`,
  };
}

function redact(u: URL): string {
  return `${u.protocol}//${u.host}/<redacted>`;
}
