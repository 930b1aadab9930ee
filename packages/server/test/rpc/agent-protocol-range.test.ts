import { describe, expect, it } from 'vitest';
import {
  AGENT_PROTOCOL_VERSION,
  agentProtocolRefusal,
  checkAgentProtocol,
  SUPPORTED_AGENT_PROTOCOLS,
} from '@leoflow/protocol';

describe('agent protocol range rule', () => {
  const range = { min: 3, max: 5 };

  it('accepts every version inside the range, both ends included', () => {
    for (const v of [3, 4, 5])
      expect(checkAgentProtocol(v, range)).toEqual({ compatible: true, version: v });
  });

  it('refuses below the range as too old and above it as too new', () => {
    expect(checkAgentProtocol(2, range)).toEqual({
      compatible: false,
      version: 2,
      reason: 'agent_too_old',
    });
    expect(checkAgentProtocol(6, range)).toEqual({
      compatible: false,
      version: 6,
      reason: 'agent_too_new',
    });
  });

  it('reads an unstated version (0) as protocol 1, the wire before the field existed', () => {
    expect(checkAgentProtocol(0, { min: 1, max: 1 })).toEqual({ compatible: true, version: 1 });
    expect(checkAgentProtocol(0, { min: 2, max: 2 })).toMatchObject({
      compatible: false,
      version: 1,
      reason: 'agent_too_old',
    });
  });

  it("this build's agent is accepted by this build's server", () => {
    expect(checkAgentProtocol(AGENT_PROTOCOL_VERSION).compatible).toBe(true);
    expect(SUPPORTED_AGENT_PROTOCOLS.max).toBe(AGENT_PROTOCOL_VERSION);
  });

  it('the refusal names both versions, the code and the fix', () => {
    const tooOld = checkAgentProtocol(2, range);
    if (tooOld.compatible) throw new Error('expected a refusal');
    const text = agentProtocolRefusal(tooOld, range, '0.9.0');
    expect(text).toContain('LF_AGENT_PROTOCOL_INCOMPATIBLE');
    expect(text).toContain('agent 0.9.0 speaks agent protocol 2');
    expect(text).toContain('accepts protocols 3-5');
    expect(text).toContain('upgrade the agent');
    const tooNew = checkAgentProtocol(9, { min: 1, max: 1 });
    if (tooNew.compatible) throw new Error('expected a refusal');
    expect(agentProtocolRefusal(tooNew, { min: 1, max: 1 })).toContain(
      'accepts protocol 1; upgrade the control plane first',
    );
  });
});
