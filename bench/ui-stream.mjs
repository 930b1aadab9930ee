#!/usr/bin/env node
// The web app's live stream: the server's CPU with 50 open streams from a synthetic client
// (not 50 browsers), beside two same-run baselines — the idle server, and one REST list call a
// second (what one polling page would cost). The example DAGs are loaded; nothing runs.
//
//   node bench/ui-stream.mjs [--seconds 20] [--streams 50]
//
// Prints one JSON object. CPU is the standalone process's own utime+stime (/proc), per second.
import { request } from 'node:http';
import { join } from 'node:path';
import { cleanupAll, procCpu, REPO, round, sleep, startStandalone } from './lib.mjs';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const SECONDS = arg('seconds', 20);
const STREAMS = arg('streams', 50);

async function cpuPerSecond(pid, during) {
  const before = procCpu(pid).self_ms;
  const t0 = Date.now();
  await during(SECONDS * 1000);
  const wall = (Date.now() - t0) / 1000;
  return round((procCpu(pid).self_ms - before) / wall, 2);
}

function openStream(sa) {
  const u = new URL(`${sa.url}/api/ui/events`);
  let events = 0;
  const req = request({
    host: u.hostname,
    port: u.port,
    path: u.pathname,
    headers: { authorization: `Bearer ${sa.token}` },
  });
  const opened = new Promise((resolve, reject) => {
    req.on('response', (res) => {
      if (res.statusCode !== 200) reject(new Error(`stream: ${res.statusCode}`));
      res.setEncoding('utf8');
      res.on('data', (c) => {
        events += (c.match(/^event: /gm) ?? []).length;
        resolve();
      });
    });
    req.on('error', reject);
  });
  req.end();
  return { opened, close: () => req.destroy(), events: () => events };
}

try {
  const sa = await startStandalone({ dagsFolder: join(REPO, 'examples/dags'), label: 'ui-stream' });
  await sleep(3000); // let start-up work settle
  const idle = await cpuPerSecond(sa.pid, (ms) => sleep(ms));
  const restPoll = await cpuPerSecond(sa.pid, async (ms) => {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      const r = await fetch(`${sa.url}/api/v1/runs?limit=25`, {
        headers: { authorization: `Bearer ${sa.token}` },
      });
      await r.arrayBuffer();
      await sleep(1000);
    }
  });
  const streams = Array.from({ length: STREAMS }, () => openStream(sa));
  await Promise.all(streams.map((s) => s.opened));
  const withStreams = await cpuPerSecond(sa.pid, (ms) => sleep(ms));
  for (const s of streams) s.close();
  await sa.stop();
  process.stdout.write(
    `${JSON.stringify(
      {
        seconds: SECONDS,
        server_cpu_ms_per_s: {
          baseline_idle: idle,
          baseline_one_rest_list_call_per_s: restPoll,
          [`${STREAMS}_open_streams`]: withStreams,
        },
        events_received: streams.reduce((n, s) => n + s.events(), 0),
      },
      null,
      2,
    )}\n`,
  );
} finally {
  await cleanupAll();
}
