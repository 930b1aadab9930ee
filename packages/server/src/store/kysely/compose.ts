import type { StoreHandle } from './seam.js';

type SeamClass = new (h: StoreHandle) => object;

/** A seam's public methods (its protected handle and #private helpers are not part of it). */
type PublicOf<T> = Pick<T, keyof T>;

type Composed<C extends readonly SeamClass[]> = C extends readonly [
  infer Head extends SeamClass,
  ...infer Rest extends readonly SeamClass[],
]
  ? PublicOf<InstanceType<Head>> & Composed<Rest>
  : unknown;

/**
 * A base class whose instances carry every public method of the given seam classes, each
 * bound to one instance of its seam built over the same handle. Two seams defining the same
 * method is a programming error and throws at construction. The methods are own, writable
 * properties, so a test may still replace one on a store.
 */
export function composeSeams<const C extends readonly SeamClass[]>(
  ...seams: C
): new (h: StoreHandle) => Composed<C> {
  class ComposedSeams {
    constructor(h: StoreHandle) {
      for (const Seam of seams) {
        const seam = new Seam(h) as Record<string, unknown>;
        for (const name of Object.getOwnPropertyNames(Seam.prototype)) {
          if (name === 'constructor') continue;
          if (Object.hasOwn(this, name)) {
            throw new Error(`store seams: ${Seam.name} defines ${name} a second time`);
          }
          const method = seam[name] as (...args: unknown[]) => unknown;
          Object.defineProperty(this, name, {
            value: method.bind(seam),
            writable: true,
            configurable: true,
          });
        }
      }
    }
  }
  return ComposedSeams as unknown as new (h: StoreHandle) => Composed<C>;
}
