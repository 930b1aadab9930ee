/**
 * The message padding SHA-1 and SHA-256 share (FIPS 180-4 §5.1.1): the message, one 0x80 byte,
 * zeros, and its length in bits as a 64-bit big-endian integer, rounded up to 64-byte blocks.
 * A string is padded as its UTF-8 bytes. Returned with a big-endian view for reading the words.
 */
export function padMessage(data: Uint8Array | string): { padded: Uint8Array; view: DataView } {
  const msg = typeof data === 'string' ? new TextEncoder().encode(data) : data;
  const bitLen = msg.length * 8;
  const padded = new Uint8Array(Math.ceil((msg.length + 9) / 64) * 64);
  padded.set(msg);
  padded[msg.length] = 0x80;
  const view = new DataView(padded.buffer);
  // Inputs here are far below 2^53 bits, so splitting the length with division is exact.
  view.setUint32(padded.length - 8, Math.floor(bitLen / 0x100000000));
  view.setUint32(padded.length - 4, bitLen >>> 0);
  return { padded, view };
}
