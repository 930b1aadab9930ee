// resource.Quantity strings ("250m", "1.5", "128Mi", "1G", "2e3") as plain numbers, for the
// scheduler's fit check: CPU in millicores, everything else in base units.
const BINARY: Record<string, number> = {
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};
const DECIMAL: Record<string, number> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
};

export function parseQuantity(text: string): number {
  const match = /^([+-]?[0-9.]+)(e[+-]?[0-9]+|E[+-]?[0-9]+)?([A-Za-z]*)$/.exec(text.trim());
  if (!match)
    throw new Error(
      `quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': ${text}`,
    );
  let value = Number(match[1]);
  if (match[2] !== undefined) value *= 10 ** Number(match[2].slice(1));
  const suffix = match[3] ?? '';
  const factor = BINARY[suffix] ?? DECIMAL[suffix];
  if (factor === undefined) throw new Error(`unable to parse quantity's suffix: ${text}`);
  return value * factor;
}

export function milliCpu(text: string | undefined): number {
  return text === undefined ? 0 : Math.round(parseQuantity(text) * 1000);
}

export function bytes(text: string | undefined): number {
  return text === undefined ? 0 : parseQuantity(text);
}
