/**
 * Waiting on and counting what a running control plane does, for the tests that drive one
 * through the kube-apiserver double.
 */

/** Polls `probe` until it answers something other than undefined; fails naming `what`. */
export async function waitFor<T>(
  what: string,
  probe: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 30_000,
  pollMs = 100,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

/** The control plane's leoflow_token_reviews_total (NaN when the metric is not exposed). */
export async function tokenReviewsCounted(metricsUrl: string | null): Promise<number> {
  if (metricsUrl === null) throw new Error('the control plane exposes no metrics port');
  const text = await (await fetch(metricsUrl)).text();
  return Number(/^leoflow_token_reviews_total (\d+)/m.exec(text)?.[1] ?? NaN);
}
