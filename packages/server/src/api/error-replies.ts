import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { httpStatusOf, isLeoflowError, MAX_REST_BODY_BYTES } from '@leoflow/core';
import { isDiskFull } from './disk-full.js';

/** Longest path parameter the router matches: 250 characters, each percent-encoded (3 bytes). */
export const MAX_PATH_PARAM_LENGTH = 750;

/**
 * Every refusal the API sends has an LF_ code, whoever raised it: our handlers (LeoflowError),
 * schema validation, Fastify itself (body limits, content types) or the router.
 */
export function answerError(err: FastifyError, req: FastifyRequest, reply: FastifyReply) {
  if (isLeoflowError(err)) {
    return reply
      .status(httpStatusOf(err.code))
      .send({ code: err.code, message: err.message, details: err.details ?? {} });
  }
  const e = err as { validation?: unknown; statusCode?: number; message: string };
  if (e.validation) {
    return reply.status(httpStatusOf('LF_BAD_REQUEST')).send({
      code: 'LF_BAD_REQUEST',
      message: `invalid request: ${e.message}`,
      details: { validation: e.validation },
    });
  }
  // Fastify's own errors carry their status (FST_ERR_CTP_BODY_TOO_LARGE is 413); classify by it.
  if (e.statusCode === 413) {
    return reply.status(httpStatusOf('LF_BODY_TOO_LARGE')).send({
      code: 'LF_BODY_TOO_LARGE',
      message: `the request body is over the ${MAX_REST_BODY_BYTES} byte (8 MiB) limit`,
      details: { limit_bytes: MAX_REST_BODY_BYTES },
    });
  }
  // Other client errors Fastify raised itself (415, 400 on a bad JSON body, …) keep Fastify's
  // status under the one code for a malformed request.
  if (e.statusCode && e.statusCode < 500) {
    return reply
      .status(e.statusCode)
      .send({ code: 'LF_BAD_REQUEST', message: e.message, details: {} });
  }
  if (isDiskFull(err)) {
    req.log.error({ err }, 'request refused: the store is out of space');
    return reply.status(httpStatusOf('LF_STORE_DISK_FULL')).send({
      code: 'LF_STORE_DISK_FULL',
      message:
        "the store could not write: its filesystem is full. Nothing of this request was written; free space on the database's filesystem (Lite: the data dir's) and retry",
      details: {},
    });
  }
  req.log.error({ err }, 'request failed');
  return reply
    .status(httpStatusOf('LF_INTERNAL'))
    .send({ code: 'LF_INTERNAL', message: 'internal error; see the server log', details: {} });
}

/** The router's own refusals (a path parameter too long, bad percent-encoding). */
export function answerRouterRefusal(
  err: FastifyError,
  _req: unknown,
  frameworkReply: unknown,
): void {
  const reply = frameworkReply as FastifyReply;
  const code = err.code;
  if (code === 'FST_ERR_MAX_PARAM_LENGTH') {
    void reply.status(httpStatusOf('LF_PATH_PARAM_TOO_LONG')).send({
      code: 'LF_PATH_PARAM_TOO_LONG',
      message: `a path segment is over ${MAX_PATH_PARAM_LENGTH} characters; ids are at most 250 characters`,
      details: { limit: MAX_PATH_PARAM_LENGTH },
    });
    return;
  }
  void reply.status(400).send({
    code: 'LF_BAD_REQUEST',
    message:
      code === 'FST_ERR_BAD_URL' ? 'the URL path is not valid percent-encoding' : 'bad request',
    details: {},
  });
}
