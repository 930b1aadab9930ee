import { describe, expect, it } from 'vitest';
import { resolveSettings } from '@leoflow/core';
import { DEFAULT_DRAIN_GRACE_MS, DEFAULT_LEASE_TIMINGS } from '../../src/config/pro-config.js';
import { agentUrl, agentUrls, defaultServerConfig } from '../../src/config/server-config.js';
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

  it('agent.advertise_url: the list agents receive, this replica first when the list names it', () => {
    const list = 'http://127.0.0.1:8793,http://127.0.0.1:8794';
    const r = resolveSettings({
      flags: { 'database.url': 'postgres://u@db/x', 'agent.advertise_url': list },
    });
    const cfg = serverConfigFromSettings(r, { role: 'server', executors: noExecutors });
    expect(cfg.agent.advertiseUrls).toEqual(['http://127.0.0.1:8793', 'http://127.0.0.1:8794']);
    // replica B (listening on 8794) hands its agents its own URL first, then the rest
    expect(agentUrls(cfg, 8794)).toEqual(['http://127.0.0.1:8794', 'http://127.0.0.1:8793']);
    expect(agentUrl(cfg, 8793)).toBe(list);
    // a load-balanced name (not this replica's listen address) is passed on as given
    cfg.agent.advertiseUrls = ['https://agents.example.com:8793'];
    expect(agentUrl(cfg, 8793)).toBe('https://agents.example.com:8793');
    // nothing advertised: this replica's own listen address
    cfg.agent.advertiseUrls = null;
    expect(agentUrl(cfg, 8795)).toBe('http://127.0.0.1:8795');
  });
});
