import { LeoflowError } from '@leoflow/core';

/** A port this process listens on, named as the operator set it. */
export interface PortSetting {
  /** the flag that sets it, e.g. `--metrics-port` */
  flag: string;
  port: number;
}

/**
 * Runs `bind` and turns a port that cannot be had into an error naming the flag and the port,
 * so a second installation on one host is told what to change instead of half starting.
 */
export async function bindNamed<T>(setting: PortSetting, bind: () => Promise<T>): Promise<T> {
  try {
    return await bind();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException | undefined)?.code;
    const { flag, port } = setting;
    if (code === 'EADDRINUSE') {
      throw new LeoflowError(
        'LF_PORT_UNAVAILABLE',
        `${flag} ${port} is in use: pass another port, or 0 for a free one`,
        { flag, port },
      );
    }
    if (code === 'EACCES') {
      throw new LeoflowError(
        'LF_PORT_UNAVAILABLE',
        `${flag} ${port} needs privileges this process does not have: pass a port above 1023, or 0 for a free one`,
        { flag, port },
      );
    }
    if (code === 'EADDRNOTAVAIL') {
      throw new LeoflowError(
        'LF_PORT_UNAVAILABLE',
        `${flag} ${port}: the listen address is not one of this host's; check the host setting beside it`,
        { flag, port },
      );
    }
    throw err;
  }
}

/** Whether an error is a port that cannot be had (as bindNamed reports it). */
export function isPortUnavailable(err: unknown): boolean {
  return err instanceof LeoflowError && err.code === 'LF_PORT_UNAVAILABLE';
}
