import http2 from 'node:http2';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENT_MAX_MESSAGE_BYTES } from '../../packages/server/src/rpc/agent-server.js';
import { createHarness, T0, type Harness } from '../../packages/server/test/support/harness.js';

/**
 * Issue 10 item 3: the agent port (real agent RPC server, real HTTP/2) bounds what a caller can
 * make it read or inflate, refuses anonymous bodies unread, and never echoes parser text.
 */

const PUSH_LOGS = '/leoflow.agent.v1.AgentService/PushLogs';
const INFLATED_BOMB_BYTES = 1024 * 1024 * 1024;

let h: Harness;
let inflated = 0;
let bomb: Buffer;
let token: string;

/** ~1 MB of gzip that inflates to 1 GiB of zeros, built chunk by chunk (never 1 GiB in memory). */
async function gzipBomb(): Promise<Buffer> {
  const gz = zlib.createGzip({ level: 9 });
  const parts: Buffer[] = [];
  gz.on('data', (b: Buffer) => parts.push(b));
  const done = new Promise((r) => gz.once('end', r));
  const zeros = Buffer.alloc(1024 * 1024);
  for (let i = 0; i < INFLATED_BOMB_BYTES / zeros.length; i++) {
    if (!gz.write(zeros)) await new Promise((r) => gz.once('drain', r));
  }
  gz.end();
  await done;
  return Buffer.concat(parts);
}

function envelope(flags: number, declaredLength: number): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt8(flags, 0);
  head.writeUInt32BE(declaredLength, 1);
  return head;
}

interface Answer {
  status: number;
  message: string;
  /** bytes of the request body written before the answer arrived */
  sentBeforeAnswer: number;
}

/**
 * One raw gRPC call. `body` is written in 16 KiB slices, each only after the previous one was
 * flushed, so `sentBeforeAnswer` tells how much the server had been offered when it answered.
 */
function rawCall(
  port: number,
  opts: { token?: string; encoding?: string; body: Buffer; holdOpen?: boolean },
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on('error', () => undefined);
    const headers: http2.OutgoingHttpHeaders = {
      ':method': 'POST',
      ':path': PUSH_LOGS,
      'content-type': 'application/grpc',
      te: 'trailers',
    };
    if (opts.token) headers['authorization'] = `Bearer ${opts.token}`;
    if (opts.encoding) headers['grpc-encoding'] = opts.encoding;
    const stream = session.request(headers);
    let sent = 0;
    let answered = false;
    let sentAtAnswer = 0;
    const statusOf: { status?: number; message?: string } = {};
    const take = (h: http2.IncomingHttpHeaders) => {
      if (h['grpc-status'] !== undefined) {
        if (!answered) sentAtAnswer = sent;
        answered = true;
        statusOf.status = Number(h['grpc-status']);
        statusOf.message = decodeURIComponent(String(h['grpc-message'] ?? ''));
      }
    };
    stream.on('response', take);
    stream.on('trailers', take);
    stream.on('data', () => undefined);
    stream.on('error', () => undefined);
    stream.on('close', () => {
      session.close();
      if (statusOf.status === undefined) return reject(new Error('no gRPC status received'));
      resolve({
        status: statusOf.status,
        message: statusOf.message ?? '',
        sentBeforeAnswer: sentAtAnswer,
      });
    });
    const SLICE = 16 * 1024;
    const pump = (offset: number): void => {
      if (answered || stream.destroyed || stream.closed) return;
      if (offset >= opts.body.length) {
        if (!opts.holdOpen) stream.end();
        return;
      }
      const slice = opts.body.subarray(offset, offset + SLICE);
      stream.write(slice, () => {
        sent = offset + slice.length;
        // Give the server a moment to answer before offering more.
        setTimeout(() => pump(offset + slice.length), 1);
      });
    };
    pump(0);
  });
}

beforeAll(async () => {
  h = await createHarness({ rpc: 'http2', onInflate: (n) => (inflated += n) });
  // A genuine credential for an attempt that does not exist: the signature is what the gate checks.
  token = await h.tokens.mint(
    {
      tenant_id: 'default',
      dag_id: 'd',
      dag_run_id: 'r',
      run_id: 'r',
      task_id: 't',
      try_number: 1,
      task_instance_id: 'ti-none',
    },
    T0,
  );
  bomb = await gzipBomb();
}, 120_000);

afterAll(async () => {
  await h?.close();
});

describe('agent port limits (issue 10 item 3)', () => {
  it('refuses a 1 MB gzip bomb without a token before inflating a single byte', async () => {
    expect(bomb.length).toBeLessThan(2 * 1024 * 1024);
    inflated = 0;
    const res = await rawCall(h.agentPort!, {
      encoding: 'gzip',
      body: Buffer.concat([envelope(1, bomb.length), bomb]),
    });
    expect(res.status).toBe(16); // Unauthenticated
    expect(inflated).toBe(0);
    // The gate answered without waiting for the body: far less than the bomb was offered.
    expect(res.sentBeforeAnswer).toBeLessThan(bomb.length / 4);
  });

  it('stops inflating a gzip bomb from a signed caller at the message cap', async () => {
    inflated = 0;
    const res = await rawCall(h.agentPort!, {
      token,
      encoding: 'gzip',
      body: Buffer.concat([envelope(1, bomb.length), bomb]),
    });
    expect(res.status).toBe(8); // ResourceExhausted
    expect(inflated).toBeGreaterThan(0);
    // At most the cap plus one 16 KiB decoder chunk, against 1 GiB the bomb would become.
    expect(inflated).toBeLessThanOrEqual(AGENT_MAX_MESSAGE_BYTES + 16 * 1024);
    expect(res.message).not.toMatch(/readMaxBytes|zlib|Z_/);
  });

  it('refuses an uncompressed 400 MB-declared message from its length prefix, before the rest is sent', async () => {
    const declared = 400 * 1024 * 1024;
    // The prefix and 256 KiB of the body; the caller would send 400 MB more if let.
    const body = Buffer.concat([envelope(0, declared), Buffer.alloc(256 * 1024, 0x41)]);
    const res = await rawCall(h.agentPort!, { token, body, holdOpen: true });
    expect(res.status).toBe(8); // ResourceExhausted
    expect(res.message).toBe(
      `request message larger than the agent port's limit of ${AGENT_MAX_MESSAGE_BYTES} bytes`,
    );
    expect(res.sentBeforeAnswer).toBeLessThan(body.length);
  });

  it('refuses an uncompressed body without a token before reading it', async () => {
    const body = Buffer.concat([envelope(0, 3 * 1024 * 1024), Buffer.alloc(3 * 1024 * 1024, 0x41)]);
    const res = await rawCall(h.agentPort!, { body });
    expect(res.status).toBe(16);
    expect(res.message).toBe('missing or invalid agent token');
    expect(res.sentBeforeAnswer).toBeLessThan(body.length / 4);
  });

  it('answers malformed protobuf with InvalidArgument and a fixed text, never the parser message', async () => {
    // Field 0 / wire type 0: "illegal tag" to the protobuf parser.
    const garbage = Buffer.from([0x00, 0x00, 0xff, 0xff, 0xff, 0x07]);
    const res = await rawCall(h.agentPort!, {
      token,
      body: Buffer.concat([envelope(0, garbage.length), garbage]),
    });
    expect(res.status).toBe(3); // InvalidArgument
    expect(res.message).toBe('request message could not be decoded');
    expect(res.message).not.toMatch(/parse|tag|binary|wire/i);
  });

  it('answers a broken gzip stream with a fixed text', async () => {
    const notGzip = Buffer.from('definitely not gzip');
    const res = await rawCall(h.agentPort!, {
      token,
      encoding: 'gzip',
      body: Buffer.concat([envelope(1, notGzip.length), notGzip]),
    });
    expect(res.status).toBe(3);
    expect(res.message).toBe('request message could not be decoded');
  });
});
