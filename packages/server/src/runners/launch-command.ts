/**
 * The door URL an inbound runner connects to, and the command printed at registration. The
 * URL goes to the runner daemon on stdin, so the token is in no process listing (argv is
 * world-readable in /proc); `printf` is a shell builtin, so it never appears as an argv either.
 */
export function runnerDoorUrl(doorBaseUrl: string, token: string): string {
  return `${doorBaseUrl.replace(/\/+$/, '')}/runners/${token}/`;
}

export function runnerLaunchCommand(doorBaseUrl: string, token: string): string {
  return `printf '%s\\n' '${runnerDoorUrl(doorBaseUrl, token)}' | leoflow-runner --url-stdin`;
}
