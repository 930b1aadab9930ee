/** A single shipped line is capped; longer lines keep their head and a marker. */
export const MAX_LINE_BYTES = 64 * 1024;

const LF = 0x0a;
const CR = 0x0d;

/**
 * Splits a byte stream into lines. Handles chunks that end mid-line (and mid-character), CRLF,
 * and lines longer than MAX_LINE_BYTES without buffering them: bytes past the cap are counted
 * and discarded until the newline arrives.
 */
export class LineSplitter {
  #parts: Buffer[] = [];
  #kept = 0;
  #discarded = 0;

  constructor(
    private readonly emit: (line: string) => void,
    private readonly maxBytes: number = MAX_LINE_BYTES,
  ) {}

  push(chunk: Buffer): void {
    let start = 0;
    while (start < chunk.length) {
      const nl = chunk.indexOf(LF, start);
      const end = nl === -1 ? chunk.length : nl;
      this.#append(chunk.subarray(start, end));
      if (nl === -1) break;
      this.#emitCurrent();
      start = nl + 1;
    }
  }

  /** Emits a trailing partial line at end of stream. */
  end(): void {
    if (this.#kept > 0 || this.#discarded > 0) this.#emitCurrent();
  }

  #append(bytes: Buffer): void {
    if (bytes.length === 0) return;
    const room = this.maxBytes - this.#kept;
    if (room >= bytes.length) {
      this.#parts.push(bytes);
      this.#kept += bytes.length;
      return;
    }
    if (room > 0) {
      this.#parts.push(bytes.subarray(0, room));
      this.#kept += room;
    }
    this.#discarded += bytes.length - Math.max(room, 0);
  }

  #emitCurrent(): void {
    let buf = this.#parts.length === 1 ? this.#parts[0]! : Buffer.concat(this.#parts, this.#kept);
    let discarded = this.#discarded;
    this.#parts = [];
    this.#kept = 0;
    this.#discarded = 0;
    if (discarded === 0 && buf.length > 0 && buf[buf.length - 1] === CR)
      buf = buf.subarray(0, buf.length - 1);
    if (discarded > 0) {
      // Cut back to a character boundary so the kept head does not end in a broken sequence.
      const cut = utf8Boundary(buf);
      discarded += buf.length - cut;
      buf = buf.subarray(0, cut);
      this.emit(`${buf.toString('utf8')} …[line truncated: ${discarded} more bytes dropped]`);
      return;
    }
    this.emit(buf.toString('utf8'));
  }
}

/** Length of the longest prefix of `buf` that does not end inside a multi-byte sequence. */
export function utf8Boundary(buf: Buffer): number {
  let lead = buf.length - 1;
  // At most 3 continuation bytes can follow a lead byte.
  while (lead >= 0 && buf.length - lead <= 4 && (buf[lead]! & 0xc0) === 0x80) lead--;
  if (lead < 0) return buf.length;
  const b = buf[lead]!;
  const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
  return lead + need <= buf.length ? buf.length : lead;
}
