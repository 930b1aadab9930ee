import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  createDoorFixture,
  rawGet,
  type DoorFixture,
} from '../../packages/server/test/runners/door/door-fixture.js';

/**
 * Issue 33 (small item): the door logged a runner token for paths that are not canonical —
 * `//runners/<token>/login`, `/runners/x/../<token>/login` — because only a leading
 * `/runners/<segment>` was redacted. Any token-shaped segment anywhere must go.
 */
describe('the door logs no runner token, whatever the path looks like', () => {
  let f: DoorFixture;
  let token: string;
  beforeEach(async () => {
    f = await createDoorFixture();
    await f.addCell('cell-a');
    token = (await f.addRunner('team-a', 'lin-1')).token;
    await f.place('team-a', 'cell-a');
  });
  afterEach(() => f.close());

  it('non-canonical paths: a doubled slash, a dot-dot, the query, percent-encoding', async () => {
    const encoded = token.replace('_', '%5F');
    for (const path of [
      `//runners/${token}/login`,
      `/runners/x/../${token}/login`,
      `/runners/./${token}/login`,
      `/x/${token}`,
      `/runners/x/login?t=${token}`,
      `/runners/${encoded}/login`,
      `///runners//${token}//login`,
    ]) {
      await rawGet(f.url, path);
    }
    const logs = f.logLines.join('');
    expect(logs).toContain('door request');
    expect(logs).not.toContain(token);
    expect(logs).not.toContain(encoded);
    expect(logs).not.toContain(token.slice(4, 24));
    expect(logs).toContain('<redacted>');
  });
});
