// The lab model's heavy loops (docs/lab.md, "The two paths"), in AssemblyScript compiled to
// WebAssembly with 128-bit SIMD: each v128 holds two doubles (f64x2), so every product below
// is the one static/lab/kernels.js computes in plain JavaScript, in double precision, two
// lanes at a time. Built by `make wasm` (mk/wasm.mk) into static/lab/kernels.wasm.
//
// Every pointer is a byte address in the module's memory, where static/lab/model.js keeps all
// its buffers (Float64Array views on the same memory). Matrices are row-major; a Linear
// weight is (out, in), as PyTorch stores it. Shapes are named as in model.js: N rows, D
// d_model, H heads of E, T positions, R the MLP's width. Sums run in a different order from
// the JavaScript twin's (two lanes, then the lanes added), which moves the last bits only.

const F64 = 8; // bytes in a double
const PAIR = 16; // bytes in a v128 of two doubles

@inline function pair(p: usize): v128 {
  return v128.load(p);
}

@inline function lanes(v: v128): f64 {
  return f64x2.extract_lane(v, 0) + f64x2.extract_lane(v, 1);
}

// The dot product of n doubles at p and q.
@inline function dot(p: usize, q: usize, n: i32): f64 {
  let acc = f64x2.splat(0);
  let i = 0;
  for (; i + 1 < n; i += 2) {
    const o = <usize>i * F64;
    acc = f64x2.add(acc, f64x2.mul(pair(p + o), pair(q + o)));
  }
  let s = lanes(acc);
  if (i < n) s += load<f64>(p + <usize>i * F64) * load<f64>(q + <usize>i * F64);
  return s;
}

// y[0..n) += a x[0..n).
@inline function axpy(y: usize, a: f64, x: usize, n: i32): void {
  const av = f64x2.splat(a);
  let i = 0;
  for (; i + 1 < n; i += 2) {
    const o = <usize>i * F64;
    v128.store(y + o, f64x2.add(pair(y + o), f64x2.mul(av, pair(x + o))));
  }
  if (i < n) {
    const o = <usize>i * F64;
    store<f64>(y + o, load<f64>(y + o) + a * load<f64>(x + o));
  }
}

// C (rows, cols) = A (rows, K) B^T with B (cols, K), plus bias[col] (bias 0: none) or plus C
// itself (accumulate 1). Both operands are read along K, two doubles at a time; each pass
// computes a 2 x 4 tile of C in eight v128 accumulators (with the six loads that feed them:
// fourteen registers, within the sixteen of x86-64 and ARM's thirty-two).
export function gemmNT(
  a: usize, rows: i32, K: i32, b: usize, cols: i32, c: usize, bias: usize, accumulate: i32,
): void {
  const K2 = K & ~1;
  const rowBytes = <usize>K * F64;
  const rows2 = rows & ~1;
  const cols4 = cols & ~3;
  for (let r = 0; r < rows2; r += 2) {
    const a0 = a + <usize>r * rowBytes;
    const a1 = a0 + rowBytes;
    const c0 = c + <usize>(r * cols) * F64;
    const c1 = c0 + <usize>cols * F64;
    for (let j = 0; j < cols4; j += 4) {
      const b0 = b + <usize>j * rowBytes;
      const b1 = b0 + rowBytes;
      const b2 = b1 + rowBytes;
      const b3 = b2 + rowBytes;
      let s00 = f64x2.splat(0), s01 = f64x2.splat(0), s02 = f64x2.splat(0), s03 = f64x2.splat(0);
      let s10 = f64x2.splat(0), s11 = f64x2.splat(0), s12 = f64x2.splat(0), s13 = f64x2.splat(0);
      for (let k = 0; k < K2; k += 2) {
        const o = <usize>k * F64;
        const x0 = pair(a0 + o);
        const x1 = pair(a1 + o);
        const w0 = pair(b0 + o);
        const w1 = pair(b1 + o);
        const w2 = pair(b2 + o);
        const w3 = pair(b3 + o);
        s00 = f64x2.add(s00, f64x2.mul(x0, w0));
        s01 = f64x2.add(s01, f64x2.mul(x0, w1));
        s02 = f64x2.add(s02, f64x2.mul(x0, w2));
        s03 = f64x2.add(s03, f64x2.mul(x0, w3));
        s10 = f64x2.add(s10, f64x2.mul(x1, w0));
        s11 = f64x2.add(s11, f64x2.mul(x1, w1));
        s12 = f64x2.add(s12, f64x2.mul(x1, w2));
        s13 = f64x2.add(s13, f64x2.mul(x1, w3));
      }
      let t00 = lanes(s00), t01 = lanes(s01), t02 = lanes(s02), t03 = lanes(s03);
      let t10 = lanes(s10), t11 = lanes(s11), t12 = lanes(s12), t13 = lanes(s13);
      if (K2 < K) {
        const o = <usize>K2 * F64;
        const x0 = load<f64>(a0 + o);
        const x1 = load<f64>(a1 + o);
        const w0 = load<f64>(b0 + o);
        const w1 = load<f64>(b1 + o);
        const w2 = load<f64>(b2 + o);
        const w3 = load<f64>(b3 + o);
        t00 += x0 * w0; t01 += x0 * w1; t02 += x0 * w2; t03 += x0 * w3;
        t10 += x1 * w0; t11 += x1 * w1; t12 += x1 * w2; t13 += x1 * w3;
      }
      const o = <usize>j * F64;
      if (accumulate) {
        t00 += load<f64>(c0 + o); t01 += load<f64>(c0 + o, 8);
        t02 += load<f64>(c0 + o, 16); t03 += load<f64>(c0 + o, 24);
        t10 += load<f64>(c1 + o); t11 += load<f64>(c1 + o, 8);
        t12 += load<f64>(c1 + o, 16); t13 += load<f64>(c1 + o, 24);
      } else if (bias) {
        const z0 = load<f64>(bias + o), z1 = load<f64>(bias + o, 8);
        const z2 = load<f64>(bias + o, 16), z3 = load<f64>(bias + o, 24);
        t00 += z0; t01 += z1; t02 += z2; t03 += z3;
        t10 += z0; t11 += z1; t12 += z2; t13 += z3;
      }
      store<f64>(c0 + o, t00); store<f64>(c0 + o, t01, 8);
      store<f64>(c0 + o, t02, 16); store<f64>(c0 + o, t03, 24);
      store<f64>(c1 + o, t10); store<f64>(c1 + o, t11, 8);
      store<f64>(c1 + o, t12, 16); store<f64>(c1 + o, t13, 24);
    }
    for (let j = cols4; j < cols; j++) {
      const bj = b + <usize>j * rowBytes;
      const o = <usize>j * F64;
      let t0 = dot(a0, bj, K);
      let t1 = dot(a1, bj, K);
      if (accumulate) {
        t0 += load<f64>(c0 + o);
        t1 += load<f64>(c1 + o);
      } else if (bias) {
        t0 += load<f64>(bias + o);
        t1 += load<f64>(bias + o);
      }
      store<f64>(c0 + o, t0);
      store<f64>(c1 + o, t1);
    }
  }
  for (let r = rows2; r < rows; r++) {
    const a0 = a + <usize>r * rowBytes;
    const c0 = c + <usize>(r * cols) * F64;
    for (let j = 0; j < cols; j++) {
      const o = <usize>j * F64;
      let t = dot(a0, b + <usize>j * rowBytes, K);
      if (accumulate) t += load<f64>(c0 + o);
      else if (bias) t += load<f64>(bias + o);
      store<f64>(c0 + o, t);
    }
  }
}

// C (rows, cols) = A B (accumulate 0) or C + A B (accumulate 1), B (K, cols) row-major and A
// (rows, K) read at a + (r aRow + k aK) doubles: A itself (aRow K, aK 1) or a matrix stored
// transposed (aRow 1, aK rows of the stored one). The backward passes' dX = dY W and dW += dY^T X
// without transposing anything. Each pass computes a 4 x 4 tile of C in eight v128
// accumulators, from four broadcast entries of A and two pairs of a row of B.
export function gemmNN(
  a: usize, aRow: i32, aK: i32, rows: i32, K: i32, b: usize, cols: i32, c: usize, accumulate: i32,
): void {
  const rowStep = <usize>aRow * F64;
  const kStep = <usize>aK * F64;
  const bRow = <usize>cols * F64;
  const rows4 = rows & ~3;
  const cols4 = cols & ~3;
  let r = 0;
  for (; r < rows4; r += 4) {
    const a0 = a + <usize>r * rowStep;
    const a1 = a0 + rowStep;
    const a2 = a1 + rowStep;
    const a3 = a2 + rowStep;
    const c0 = c + <usize>r * bRow;
    for (let j = 0; j < cols4; j += 4) {
      const o = <usize>j * F64;
      let s00 = f64x2.splat(0), s01 = f64x2.splat(0), s10 = f64x2.splat(0), s11 = f64x2.splat(0);
      let s20 = f64x2.splat(0), s21 = f64x2.splat(0), s30 = f64x2.splat(0), s31 = f64x2.splat(0);
      for (let k = 0; k < K; k++) {
        const ko = <usize>k * kStep;
        const bk = b + <usize>k * bRow + o;
        const w0 = pair(bk);
        const w1 = v128.load(bk, 16);
        const x0 = v128.load64_splat(a0 + ko);
        const x1 = v128.load64_splat(a1 + ko);
        const x2 = v128.load64_splat(a2 + ko);
        const x3 = v128.load64_splat(a3 + ko);
        s00 = f64x2.add(s00, f64x2.mul(x0, w0));
        s01 = f64x2.add(s01, f64x2.mul(x0, w1));
        s10 = f64x2.add(s10, f64x2.mul(x1, w0));
        s11 = f64x2.add(s11, f64x2.mul(x1, w1));
        s20 = f64x2.add(s20, f64x2.mul(x2, w0));
        s21 = f64x2.add(s21, f64x2.mul(x2, w1));
        s30 = f64x2.add(s30, f64x2.mul(x3, w0));
        s31 = f64x2.add(s31, f64x2.mul(x3, w1));
      }
      const p0 = c0 + o;
      const p1 = p0 + bRow;
      const p2 = p1 + bRow;
      const p3 = p2 + bRow;
      if (accumulate) {
        s00 = f64x2.add(s00, pair(p0)); s01 = f64x2.add(s01, v128.load(p0, 16));
        s10 = f64x2.add(s10, pair(p1)); s11 = f64x2.add(s11, v128.load(p1, 16));
        s20 = f64x2.add(s20, pair(p2)); s21 = f64x2.add(s21, v128.load(p2, 16));
        s30 = f64x2.add(s30, pair(p3)); s31 = f64x2.add(s31, v128.load(p3, 16));
      }
      v128.store(p0, s00); v128.store(p0, s01, 16);
      v128.store(p1, s10); v128.store(p1, s11, 16);
      v128.store(p2, s20); v128.store(p2, s21, 16);
      v128.store(p3, s30); v128.store(p3, s31, 16);
    }
    for (let j = cols4; j < cols; j++) {
      for (let i = 0; i < 4; i++) {
        nnEntry(a0 + <usize>i * rowStep, kStep, K, b, bRow, j, c0 + <usize>i * bRow, accumulate);
      }
    }
  }
  for (; r < rows; r++) {
    const ar = a + <usize>r * rowStep;
    const cr = c + <usize>r * bRow;
    for (let j = 0; j < cols; j++) nnEntry(ar, kStep, K, b, bRow, j, cr, accumulate);
  }
}

// One entry C[r, j] of gemmNN: ar is A's row r, cr C's.
@inline function nnEntry(
  ar: usize, kStep: usize, K: i32, b: usize, bRow: usize, j: i32, cr: usize, accumulate: i32,
): void {
  const o = <usize>j * F64;
  let t = 0.0;
  for (let k = 0; k < K; k++) {
    t += load<f64>(ar + <usize>k * kStep) * load<f64>(b + <usize>k * bRow + o);
  }
  if (accumulate) t += load<f64>(cr + o);
  store<f64>(cr + o, t);
}

// dst[0..n) += src[0..n) (the residual paths).
export function addTo(dst: usize, src: usize, n: i32): void {
  axpy(dst, 1, src, n);
}

// dst[0..n) *= src[0..n) (the GELU's slope on its gradient).
export function mulBy(dst: usize, src: usize, n: i32): void {
  let i = 0;
  for (; i + 1 < n; i += 2) {
    const o = <usize>i * F64;
    v128.store(dst + o, f64x2.mul(pair(dst + o), pair(src + o)));
  }
  if (i < n) {
    const o = <usize>i * F64;
    store<f64>(dst + o, load<f64>(dst + o) * load<f64>(src + o));
  }
}

// The sum of the squares of n doubles (the gradients' squared L2 norm, for clipping).
export function sumSquares(x: usize, n: i32): f64 {
  return dot(x, x, n);
}

// x[0..n) *= c.
export function scale(x: usize, n: i32, c: f64): void {
  const cv = f64x2.splat(c);
  let i = 0;
  for (; i + 1 < n; i += 2) {
    const o = <usize>i * F64;
    v128.store(x + o, f64x2.mul(pair(x + o), cv));
  }
  if (i < n) store<f64>(x + <usize>i * F64, load<f64>(x + <usize>i * F64) * c);
}

// One AdamW update of n parameters as torch.optim.AdamW makes it (static/lab/trainer.js):
// m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2, p = p shrink - stepSize m / (sqrt(v) /
// correction2 + eps), shrink = 1 - rate x weight decay.
const BETA1 = 0.9;
const BETA2 = 0.999;
const ADAM_EPS = 1e-8;

@inline function adamLane(
  p: f64, g: f64, m: f64, v: f64, shrink: f64, stepSize: f64, correction2: f64,
  mOut: usize, vOut: usize, pOut: usize,
): void {
  const m1 = BETA1 * m + (1 - BETA1) * g;
  const v1 = BETA2 * v + (1 - BETA2) * g * g;
  store<f64>(mOut, m1);
  store<f64>(vOut, v1);
  store<f64>(pOut, p * shrink - (stepSize * m1) / (Math.sqrt(v1) / correction2 + ADAM_EPS));
}

export function adamw(
  p: usize, g: usize, m: usize, v: usize, n: i32, shrink: f64, stepSize: f64, correction2: f64,
): void {
  const b1 = f64x2.splat(BETA1), c1 = f64x2.splat(1 - BETA1);
  const b2 = f64x2.splat(BETA2), c2 = f64x2.splat(1 - BETA2);
  let i = 0;
  for (; i + 1 < n; i += 2) {
    const o = <usize>i * F64;
    const gv = pair(g + o);
    const m1 = f64x2.add(f64x2.mul(b1, pair(m + o)), f64x2.mul(c1, gv));
    const v1 = f64x2.add(f64x2.mul(b2, pair(v + o)), f64x2.mul(f64x2.mul(c2, gv), gv));
    v128.store(m + o, m1);
    v128.store(v + o, v1);
    const denominator = f64x2.add(
      f64x2.div(f64x2.sqrt(v1), f64x2.splat(correction2)),
      f64x2.splat(ADAM_EPS),
    );
    v128.store(p + o, f64x2.sub(
      f64x2.mul(pair(p + o), f64x2.splat(shrink)),
      f64x2.div(f64x2.mul(f64x2.splat(stepSize), m1), denominator),
    ));
  }
  if (i < n) {
    const o = <usize>i * F64;
    adamLane(load<f64>(p + o), load<f64>(g + o), load<f64>(m + o), load<f64>(v + o), shrink,
      stepSize, correction2, m + o, v + o, p + o);
  }
}

// sums[0..cols) += the column sums of m (rows, cols) (a Linear's bias gradient).
export function columnSums(m: usize, rows: i32, cols: i32, sums: usize): void {
  const rowBytes = <usize>cols * F64;
  for (let r = 0; r < rows; r++) axpy(sums, 1, m + <usize>r * rowBytes, cols);
}

// Layer norm over rows of D (biased variance, as torch.nn.LayerNorm): xhat = (x - mean) /
// sqrt(var + eps), out = xhat gain + shift; rstd keeps 1 / sqrt(var + eps) per row.
export function layerNorm(
  x: usize, rows: i32, D: i32, eps: f64, gain: usize, shift: usize,
  xhat: usize, rstd: usize, out: usize,
): void {
  const rowBytes = <usize>D * F64;
  for (let n = 0; n < rows; n++) {
    const r = <usize>n * rowBytes;
    let mean = 0.0;
    for (let d = 0; d < D; d++) mean += load<f64>(x + r + <usize>d * F64);
    mean /= D;
    let variance = 0.0;
    for (let d = 0; d < D; d++) {
      const c = load<f64>(x + r + <usize>d * F64) - mean;
      variance += c * c;
    }
    variance /= D;
    const rs = 1 / Math.sqrt(variance + eps);
    store<f64>(rstd + <usize>n * F64, rs);
    for (let d = 0; d < D; d++) {
      const o = <usize>d * F64;
      const h = (load<f64>(x + r + o) - mean) * rs;
      store<f64>(xhat + r + o, h);
      store<f64>(out + r + o, h * load<f64>(gain + o) + load<f64>(shift + o));
    }
  }
}

// The backward of layerNorm: dX = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)) with
// dxhat = dOut gain (dX overwritten); dGain += dOut xhat, dShift += dOut.
export function layerNormBackward(
  dOut: usize, rows: i32, D: i32, gain: usize, xhat: usize, rstd: usize,
  dX: usize, dGain: usize, dShift: usize,
): void {
  const rowBytes = <usize>D * F64;
  for (let n = 0; n < rows; n++) {
    const r = <usize>n * rowBytes;
    let sum = 0.0;
    let dotted = 0.0;
    for (let d = 0; d < D; d++) {
      const o = <usize>d * F64;
      const g = load<f64>(dOut + r + o);
      const h = load<f64>(xhat + r + o);
      store<f64>(dGain + o, load<f64>(dGain + o) + g * h);
      store<f64>(dShift + o, load<f64>(dShift + o) + g);
      const dh = g * load<f64>(gain + o);
      sum += dh;
      dotted += dh * h;
    }
    sum /= D;
    dotted /= D;
    const rs = load<f64>(rstd + <usize>n * F64);
    for (let d = 0; d < D; d++) {
      const o = <usize>d * F64;
      const dh = load<f64>(dOut + r + o) * load<f64>(gain + o);
      store<f64>(dX + r + o, rs * (dh - sum - load<f64>(xhat + r + o) * dotted));
    }
  }
}

// The exact GELU as static/lab/kernels.js computes it (the same series and continued
// fraction for erf, Abramowitz and Stegun 7.1.6 and 7.1.14): g = u Phi(u), slope = Phi(u) +
// u phi(u), for n values of u.
const SQRT1_2 = 0.7071067811865476;
const INV_SQRT_2PI = 0.3989422804014327;
const TWO_OVER_SQRT_PI = 1.1283791670955126;
const INV_SQRT_PI = 0.5641895835477563;
const ERF_SERIES_BELOW = 2.0;
const ERF_FRACTION_TERMS = 50;
const ERF_ONE = 6.0;
const SERIES_TOLERANCE = 1e-17;
const SERIES_TERMS = 64;
// 1 / (2k + 1) for the series' terms, filled when the module starts: a multiply in the inner
// loop instead of a divide.
const INV_ODD = memory.data(SERIES_TERMS * F64);
for (let k = 0; k < SERIES_TERMS; k++) store<f64>(INV_ODD + <usize>k * F64, 1 / <f64>(2 * k + 1));

// exp(x) of two doubles, for x in [-700, 700]: x = k ln 2 + r with k an integer and |r| <=
// ln(2) / 2, exp(r) by its Taylor polynomial to r^13 / 13! (the next term is under 5e-18
// relative) in Estrin's scheme (pairs of terms, then pairs of pairs: four multiply-add steps
// deep instead of thirteen), times 2^k built in the exponent bits. ln 2 is split in a high
// part with trailing zero bits, so k ln2_hi is exact for these k (Cody and Waite).
const LOG2E = 1.4426950408889634;
const LN2_HI = 0.6931471803691238; // 0x3FE62E42FEE00000
const LN2_LO = 1.9082149292705877e-10; // ln 2 - LN2_HI
const ROUNDER = 6755399441055744.0; // 1.5 x 2^52: k + this has k in its low mantissa bits
// 1 / n! for n = 2..13.
const F2 = 0.5;
const F3 = 0.16666666666666666;
const F4 = 0.041666666666666664;
const F5 = 0.008333333333333333;
const F6 = 0.001388888888888889;
const F7 = 0.0001984126984126984;
const F8 = 2.48015873015873e-5;
const F9 = 2.7557319223985893e-6;
const F10 = 2.755731922398589e-7;
const F11 = 2.505210838544172e-8;
const F12 = 2.08767569878681e-9;
const F13 = 1.6059043836821613e-10;

// c0 + c1 r, two lanes.
@inline function line(c0: f64, c1: f64, r: v128): v128 {
  return f64x2.add(f64x2.splat(c0), f64x2.mul(f64x2.splat(c1), r));
}

@inline function exp2(x: v128): v128 {
  const k = f64x2.nearest(f64x2.mul(x, f64x2.splat(LOG2E)));
  const r = f64x2.sub(
    f64x2.sub(x, f64x2.mul(k, f64x2.splat(LN2_HI))),
    f64x2.mul(k, f64x2.splat(LN2_LO)),
  );
  const r2 = f64x2.mul(r, r);
  const r4 = f64x2.mul(r2, r2);
  const r8 = f64x2.mul(r4, r4);
  const low = f64x2.add(line(1, 1, r), f64x2.mul(r2, line(F2, F3, r))); // to r^3
  const mid = f64x2.add(line(F4, F5, r), f64x2.mul(r2, line(F6, F7, r))); // r^4 to r^7, / r^4
  const high = f64x2.add(
    f64x2.add(line(F8, F9, r), f64x2.mul(r2, line(F10, F11, r))),
    f64x2.mul(r4, line(F12, F13, r)),
  ); // r^8 to r^13, / r^8
  const p = f64x2.add(f64x2.add(low, f64x2.mul(r4, mid)), f64x2.mul(r8, high));
  const shifted = f64x2.add(k, f64x2.splat(ROUNDER));
  const integer = i64x2.sub(shifted, f64x2.splat(ROUNDER)); // k, as 64-bit integers
  const scale = i64x2.shl(i64x2.add(integer, i64x2.splat(1023)), 52); // 2^k
  return f64x2.mul(p, scale);
}

// g and slope at one u, as gelu's pairs compute them, for the values the series does not
// take (|u| / sqrt 2 >= 2, or not a number).
@inline function geluOne(v: f64, g: usize, slope: usize): void {
  const a = Math.abs(v) * SQRT1_2;
  let e = 0.0;
  let erfA = 1.0;
  if (a < ERF_SERIES_BELOW) {
    const twoA2 = 2 * a * a;
    let term = a;
    let sum = a;
    for (let k = 1; term > sum * SERIES_TOLERANCE && k < SERIES_TERMS; k++) {
      term *= twoA2 * load<f64>(INV_ODD + <usize>k * F64);
      sum += term;
    }
    e = Math.exp(-a * a);
    erfA = TWO_OVER_SQRT_PI * e * sum;
  } else if (a <= ERF_ONE) {
    e = Math.exp(-a * a);
    let f = a;
    for (let k = ERF_FRACTION_TERMS; k >= 1; k--) f = a + (<f64>k * 0.5) / f;
    erfA = 1 - (e * INV_SQRT_PI) / f;
  } else if (a != a) {
    erfA = a; // NaN
  }
  const cdf = 0.5 * (1 + (v < 0 ? -erfA : erfA));
  store<f64>(g, v * cdf);
  store<f64>(slope, cdf + v * INV_SQRT_2PI * e);
}

// g and slope for the pair of u at u + o whose |u| / sqrt 2 are a (both below
// ERF_SERIES_BELOW), given the sum of erf's series for them and twoA2 = 2 a^2.
@inline function geluPair(v: v128, a2: v128, sum: v128, g: usize, slope: usize): void {
  const e = exp2(f64x2.neg(a2));
  // erf(|u| / sqrt 2) with u's sign: the sign bit of u on a positive number.
  const erfA = v128.or(
    f64x2.mul(f64x2.mul(f64x2.splat(TWO_OVER_SQRT_PI), e), sum),
    v128.and(v, f64x2.splat(-0.0)),
  );
  const cdf = f64x2.mul(f64x2.splat(0.5), f64x2.add(f64x2.splat(1), erfA));
  v128.store(g, f64x2.mul(v, cdf));
  v128.store(slope, f64x2.add(cdf, f64x2.mul(f64x2.mul(v, f64x2.splat(INV_SQRT_2PI)), e)));
}

// Whether a term of the series still counts for either lane.
@inline function counts(term: v128, sum: v128): bool {
  return v128.any_true(f64x2.gt(term, f64x2.mul(sum, f64x2.splat(SERIES_TOLERANCE))));
}

// Four u at a time, as two pairs: where all four take the series (|u| / sqrt 2 < 2, nearly
// every u of a trained stack), it runs on the four lanes until all have converged, the two
// pairs' products interleaved so that neither waits on the other's; otherwise each u goes
// through geluOne.
export function gelu(u: usize, n: i32, g: usize, slope: usize): void {
  const below = f64x2.splat(ERF_SERIES_BELOW);
  let i = 0;
  for (; i + 3 < n; i += 4) {
    const o = <usize>i * F64;
    const v0 = pair(u + o);
    const v1 = v128.load(u + o, 16);
    const a0 = f64x2.mul(f64x2.abs(v0), f64x2.splat(SQRT1_2));
    const a1 = f64x2.mul(f64x2.abs(v1), f64x2.splat(SQRT1_2));
    if (!i64x2.all_true(v128.and(f64x2.lt(a0, below), f64x2.lt(a1, below)))) {
      for (let j = 0; j < 4; j++) {
        const p = o + <usize>j * F64;
        geluOne(load<f64>(u + p), g + p, slope + p);
      }
      continue;
    }
    const sq0 = f64x2.mul(a0, a0);
    const sq1 = f64x2.mul(a1, a1);
    const twice0 = f64x2.add(sq0, sq0);
    const twice1 = f64x2.add(sq1, sq1);
    // Two terms between tests: a term past convergence adds less than the tolerance.
    let term0 = a0, sum0 = a0, term1 = a1, sum1 = a1;
    for (let k = 1; k + 1 < SERIES_TERMS; k += 2) {
      if (!(counts(term0, sum0) || counts(term1, sum1))) break;
      const c = v128.load64_splat(INV_ODD + <usize>k * F64);
      const d = v128.load64_splat(INV_ODD + <usize>(k + 1) * F64);
      term0 = f64x2.mul(term0, f64x2.mul(twice0, c));
      term1 = f64x2.mul(term1, f64x2.mul(twice1, c));
      sum0 = f64x2.add(sum0, term0);
      sum1 = f64x2.add(sum1, term1);
      term0 = f64x2.mul(term0, f64x2.mul(twice0, d));
      term1 = f64x2.mul(term1, f64x2.mul(twice1, d));
      sum0 = f64x2.add(sum0, term0);
      sum1 = f64x2.add(sum1, term1);
    }
    geluPair(v0, sq0, sum0, g + o, slope + o);
    geluPair(v1, sq1, sum1, g + o + PAIR, slope + o + PAIR);
  }
  for (; i < n; i++) {
    const o = <usize>i * F64;
    geluOne(load<f64>(u + o), g + o, slope + o);
  }
}

// Causal multi-head attention over qkv (B x T, 3D) viewed as (B, T, 3, H, E): att (B, H, T, T)
// keeps the softmax weights (row t: columns 0..t), y (B x T, D) the heads side by side.
export function attention(
  qkv: usize, att: usize, y: usize, batch: i32, T: i32, H: i32, E: i32, scale: f64,
): void {
  const D = H * E;
  const rowBytes = <usize>(3 * D) * F64;
  for (let b = 0; b < batch; b++) {
    for (let h = 0; h < H; h++) {
      const base = qkv + <usize>(b * T) * rowBytes + <usize>(h * E) * F64;
      for (let t = 0; t < T; t++) {
        const q = base + <usize>t * rowBytes;
        const row = att + <usize>(((b * H + h) * T + t) * T) * F64;
        let max = -Infinity;
        for (let s = 0; s <= t; s++) {
          const w = dot(q, base + <usize>s * rowBytes + <usize>D * F64, E) * scale;
          store<f64>(row + <usize>s * F64, w);
          if (w > max) max = w;
        }
        let sum = 0.0;
        for (let s = 0; s <= t; s++) {
          const w = Math.exp(load<f64>(row + <usize>s * F64) - max);
          store<f64>(row + <usize>s * F64, w);
          sum += w;
        }
        const yr = y + <usize>((b * T + t) * D + h * E) * F64;
        memory.fill(yr, 0, <usize>E * F64);
        for (let s = 0; s <= t; s++) {
          const w = load<f64>(row + <usize>s * F64) / sum;
          store<f64>(row + <usize>s * F64, w);
          axpy(yr, w, base + <usize>s * rowBytes + <usize>(2 * D) * F64, E);
        }
      }
    }
  }
}

// dqkv (B x T, 3D), overwritten, from dy (B x T, D): through y = softmax(q k^T scale) v.
// dp (T) is scratch.
export function attentionBackward(
  qkv: usize, att: usize, dy: usize, dqkv: usize, dp: usize,
  batch: i32, T: i32, H: i32, E: i32, scale: f64,
): void {
  const D = H * E;
  const rowBytes = <usize>(3 * D) * F64;
  memory.fill(dqkv, 0, <usize>(batch * T) * rowBytes);
  for (let b = 0; b < batch; b++) {
    for (let h = 0; h < H; h++) {
      const offset = <usize>(b * T) * rowBytes + <usize>(h * E) * F64;
      const base = qkv + offset;
      const dbase = dqkv + offset;
      for (let t = 0; t < T; t++) {
        const q = <usize>t * rowBytes;
        const row = att + <usize>(((b * H + h) * T + t) * T) * F64;
        const yr = dy + <usize>((b * T + t) * D + h * E) * F64;
        let dotted = 0.0;
        for (let s = 0; s <= t; s++) {
          const v = <usize>s * rowBytes + <usize>(2 * D) * F64;
          const w = load<f64>(row + <usize>s * F64);
          const g = dot(yr, base + v, E);
          axpy(dbase + v, w, yr, E);
          store<f64>(dp + <usize>s * F64, g);
          dotted += w * g;
        }
        for (let s = 0; s <= t; s++) {
          const w = load<f64>(row + <usize>s * F64);
          const ds = w * (load<f64>(dp + <usize>s * F64) - dotted) * scale;
          if (ds == 0) continue;
          const k = <usize>s * rowBytes + <usize>D * F64;
          axpy(dbase + q, ds, base + k, E);
          axpy(dbase + k, ds, base + q, E);
        }
      }
    }
  }
}
