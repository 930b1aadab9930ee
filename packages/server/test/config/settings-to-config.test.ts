import { describe, expect, it } from 'vitest';
import { resolveSettings } from '@leoflow/core';
import { DEFAULT_DRAIN_GRACE_MS, DEFAULT_LEASE_TIMINGS } from '../../src/config/pro-config.js';
import { defaultServerConfig } from '../../src/config/server-config.js';
import { serverConfigFromSettings } from '../../src/config/settings-to-config.js';

const noExecutors = { kubernetes: null };

describe('settings → the control plane configuration', () => {
  it("the table's defaults are the control plane's defaults", () => {
    const r = resolveSettings({});
    const cfg = serverConfigFromSettings(r, { role: 'standalone', executors: noExecutors });
    const { settings: _s, metrics, ...rest } = cfg;
    const { metrics: defMetrics, ...defRest } = defaultServerConfig('.leoflow');
    expect(rest).toEqual(defRest);
    expect(metrics.port).toBe(defMetrics.port);
    // Lite given no metrics port may move off a taken default; a replica never does
    expect(metrics.freePortIfDefaultTaken).toBe(true);
  });

  it("server's defaults are Pro's lease and drain defaults", () => {
    const r = resolveSettings({ flags: { 'database.url': 'postgres://u@db/x' } });
    const cfg = serverConfigFromSettings(r, { role: 'server', executors: noExecutors });
    expect(cfg.pro).toEqual({
      role: 'all',
      lease: DEFAULT_LEASE_TIMINGS,
      drainGraceMs: DEFAULT_DRAIN_GRACE_MS,
      keysDir: cfg.dataDir,
    });
    expect(cfg.metrics.freePortIfDefaultTaken).toBe(false);
  });

  it('an explicit metrics port is never replaced', () => {
    const r = resolveSettings({ env: { LEOFLOW_METRICS_PORT: '9464' } });
    const cfg = serverConfigFromSettings(r, { role: 'standalone', executors: noExecutors });
    expect(cfg.metrics.freePortIfDefaultTaken).toBe(false);
  });

  it('keeps where each setting came from, for doctor', () => {
    const r = resolveSettings({ file: { http: { port: 9 } } });
    const cfg = serverConfigFromSettings(r, { role: 'standalone', executors: noExecutors });
    expect(cfg.settings?.sources['http.port']).toBe('file');
    expect(cfg.http.port).toBe(9);
  });
});
