// lab32: the portable generator of docs/lab.md ("The generator: lab32"), the JavaScript twin of
// normdive.lab.random. Every operation is on unsigned 32-bit integers, wrapping: Math.imul
// multiplies modulo 2^32 and `>>> 0` reads the result as unsigned.

export const WEIGHTS = 1;
export const BATCHES = 2;
export const HELDOUT = 3;

const GOLDEN = 0x9e3779b9; // the Weyl increment: 2^32 / golden ratio
const TWO_26 = 2 ** 26;
const TWO_53 = 2 ** 53;
const MAX_BELOW = 2 ** 16;

// The "lowbias32" finaliser (C. Wellons, 2018).
/** @param {number} value @returns {number} */
export function mix32(value) {
  let x = value >>> 0;
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d) >>> 0;
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b) >>> 0;
  x ^= x >>> 16;
  return x >>> 0;
}

export class Lab32 {
  // seed: an integer in [0, 2^32); stream: one of WEIGHTS, BATCHES, HELDOUT.
  /** @param {number} seed @param {number} stream */
  constructor(seed, stream) {
    if (!Number.isInteger(seed) || seed < 0 || seed >= 2 ** 32) {
      throw new RangeError(`lab32 seed ${seed} is not an integer in [0, 2^32)`);
    }
    this.state = mix32((seed ^ mix32(stream)) >>> 0);
  }

  nextU32() {
    this.state = (this.state + GOLDEN) >>> 0;
    return mix32(this.state);
  }

  // In (0, 1), 53 bits from two draws; every step is exact in double precision.
  uniform() {
    const a = this.nextU32() >>> 5; // 27 bits
    const b = this.nextU32() >>> 6; // 26 bits
    return (a * TWO_26 + b + 0.5) / TWO_53;
  }

  // Box-Muller, cosine branch only: two uniforms, one normal.
  normal() {
    const u1 = this.uniform();
    const u2 = this.uniform();
    return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
  }

  // An integer in [0, n), 1 <= n <= 2^16.
  /** @param {number} n @returns {number} */
  below(n) {
    if (!Number.isInteger(n) || n < 1 || n > MAX_BELOW) {
      throw new RangeError(`lab32 below(${n}): n must be an integer in [1, 2^16]`);
    }
    // uniform() rounds to exactly 1.0 once in 2^53 draws: capped, as in the Python twin.
    return Math.min(Math.floor(this.uniform() * n), n - 1);
  }
}
