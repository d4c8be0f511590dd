// The lab model's heavy loops (docs/lab.md, "The two paths"), in two implementations of one
// interface: WebAssembly with 128-bit SIMD (kernels.wasm, built from wasm/lab_kernels.ts), and
// the plain JavaScript below for engines without SIMD. The path is chosen once, when this
// module loads, by feature detection; model.js keeps every buffer in the memory the chosen
// path works on, so nothing is copied between them.
//
// Every kernel takes Float64Arrays with element offsets. On the WebAssembly path the arrays
// are views on the instance's memory and the offsets become byte addresses; on the
// JavaScript path they are indexed directly. Shapes are named as in model.js.

/** The kernels one model calls, on buffers from its own `Heap`.
 * @typedef {{
 *   gemmNT: (A: Float64Array, aOff: number, rows: number, K: number, B: Float64Array,
 *     bOff: number, cols: number, C: Float64Array, cOff: number, bias: Float64Array | null,
 *     biasOff: number, accumulate: boolean) => void,
 *   gemmNN: (A: Float64Array, aRow: number, aK: number, rows: number, K: number,
 *     B: Float64Array, bOff: number, cols: number, C: Float64Array, cOff: number,
 *     accumulate: boolean) => void,
 *   addTo: (dst: Float64Array, src: Float64Array, n: number) => void,
 *   mulBy: (dst: Float64Array, src: Float64Array, n: number) => void,
 *   columnSums: (m: Float64Array, rows: number, cols: number, sums: Float64Array,
 *     sumsOff: number) => void,
 *   sumSquares: (x: Float64Array, n: number) => number,
 *   scale: (x: Float64Array, n: number, c: number) => void,
 *   adamw: (p: Float64Array, g: Float64Array, m: Float64Array, v: Float64Array, start: number,
 *     end: number, shrink: number, stepSize: number, correction2: number) => void,
 *   layerNorm: (X: Float64Array, rows: number, D: number, eps: number, P: Float64Array,
 *     gOff: number, bOff: number, xhat: Float64Array, rstd: Float64Array,
 *     out: Float64Array) => void,
 *   layerNormBackward: (dOut: Float64Array, rows: number, D: number, P: Float64Array,
 *     gOff: number, xhat: Float64Array, rstd: Float64Array, dX: Float64Array, G: Float64Array,
 *     dgOff: number, dbOff: number) => void,
 *   gelu: (u: Float64Array, n: number, g: Float64Array, slope: Float64Array) => void,
 *   attention: (qkv: Float64Array, att: Float64Array, y: Float64Array, batch: number,
 *     T: number, H: number, E: number, scale: number) => void,
 *   attentionBackward: (qkv: Float64Array, att: Float64Array, dy: Float64Array,
 *     dqkv: Float64Array, dp: Float64Array, batch: number, T: number, H: number, E: number,
 *     scale: number) => void,
 * }} Kernels */
/** "wasm": WebAssembly SIMD; "js": plain JavaScript.
 * @typedef {"wasm" | "js"} KernelPath */
/** One model's memory and the kernels that work on it: `take(n)` hands out the next n doubles.
 * @typedef {{ path: KernelPath, kernels: Kernels, take: (n: number) => Float64Array }} Heap */

// torch.optim.AdamW's defaults, which the recorder keeps (wasm/lab_kernels.ts has the same).
export const BETA1 = 0.9;
export const BETA2 = 0.999;
const ADAM_EPS = 1e-8;
const SQRT1_2 = Math.SQRT1_2;
const INV_SQRT_2PI = 1 / Math.sqrt(2 * Math.PI);
const TWO_OVER_SQRT_PI = 2 / Math.sqrt(Math.PI);
const INV_SQRT_PI = 1 / Math.sqrt(Math.PI);
// erf: below this |x| the series, above it the continued fraction; beyond ERF_ONE erf is 1 in
// double precision (erfc(6) is 2e-17).
const ERF_SERIES_BELOW = 2;
const ERF_FRACTION_TERMS = 50;
const ERF_ONE = 6;
const SERIES_TOLERANCE = 1e-17;
// 1 / (2n + 1) for the series' terms: a multiply in the inner loop instead of a divide. Below
// |x| = 2 the terms fall under SERIES_TOLERANCE relative to the sum within 32.
const SERIES_TERMS = 64;
const INV_ODD = Float64Array.from({ length: SERIES_TERMS }, (_, n) => 1 / (2 * n + 1));

// The sum of erf's series at 0 <= a < ERF_SERIES_BELOW: erf(a) = 2/sqrt(pi) exp(-a^2) times it
// (below), so that gelu can share its exp(-a^2).
/** @param {number} a @returns {number} */
function erfSeries(a) {
  const twoA2 = 2 * a * a;
  let term = a;
  let sum = a;
  for (let n = 1; term > sum * SERIES_TOLERANCE && n < SERIES_TERMS; n++) {
    term *= twoA2 * INV_ODD[n];
    sum += term;
  }
  return sum;
}

// erf(x) in double precision, within about 1e-15 relative (checked against the C library's
// erf by tests/test_lab_parity.py). |x| < 2: erf(x) = 2/sqrt(pi) exp(-x^2) sum_n
// (2x^2)^n x / (1 3 5 ... (2n+1)) (Abramowitz and Stegun 7.1.6), a series of positive terms,
// so nothing cancels. Otherwise erfc(x) = exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/
// (x + ...)))) (A&S 7.1.14), evaluated from the tail.
/** @param {number} x @returns {number} */
export function erf(x) {
  const a = Math.abs(x);
  if (a === 0) return x; // keeps the sign of zero
  if (a < ERF_SERIES_BELOW) {
    const value = TWO_OVER_SQRT_PI * Math.exp(-a * a) * erfSeries(a);
    return x < 0 ? -value : value;
  }
  if (a !== a) return x; // NaN
  if (a > ERF_ONE) return x > 0 ? 1 : -1;
  let f = a;
  for (let k = ERF_FRACTION_TERMS; k >= 1; k--) f = a + (k * 0.5) / f;
  const erfc = (Math.exp(-a * a) * INV_SQRT_PI) / f;
  return x > 0 ? 1 - erfc : erfc - 1;
}

// ---- the JavaScript path -------------------------------------------------------------------

// C (rows, cols) = A B plus a start: C itself (accumulate), else bias[biasOff + c] (bias null:
// 0). A[r, k] is read at A[aOff + r aRow + k aK] and B[k, c] at B[bOff + k bK + c bCol], so
// either operand is used as stored or transposed, in place. Each pass computes a 2 x 4 tile of
// C along K: two entries of A and four of B feed eight multiply-adds, in registers. Whatever
// the layout, an entry of C is its start plus its K products added in the order of k.
/** @param {Float64Array} A @param {number} aOff @param {number} aRow @param {number} aK
 * @param {number} rows @param {number} K @param {Float64Array} B @param {number} bOff
 * @param {number} bK @param {number} bCol @param {number} cols @param {Float64Array} C
 * @param {number} cOff @param {Float64Array | null} bias @param {number} biasOff
 * @param {boolean} accumulate */
function gemm(A, aOff, aRow, aK, rows, K, B, bOff, bK, bCol, cols, C, cOff, bias, biasOff,
  accumulate) {
  const rows2 = rows - (rows % 2);
  const cols4 = cols - (cols % 4);
  const bCol2 = 2 * bCol;
  const bCol3 = 3 * bCol;
  const start = (/** @type {number} */ at, /** @type {number} */ c) =>
    accumulate ? C[at] : bias === null ? 0 : bias[biasOff + c];
  for (let r = 0; r < rows; r += 2) {
    const pair = r < rows2;
    const a0 = aOff + r * aRow;
    const a1 = pair ? a0 + aRow : a0; // an odd last row is computed twice, stored once
    const c0 = cOff + r * cols;
    const c1 = c0 + cols;
    let c = 0;
    for (; c < cols4; c += 4) {
      let s00 = start(c0 + c, c);
      let s01 = start(c0 + c + 1, c + 1);
      let s02 = start(c0 + c + 2, c + 2);
      let s03 = start(c0 + c + 3, c + 3);
      let s10 = pair ? start(c1 + c, c) : 0;
      let s11 = pair ? start(c1 + c + 1, c + 1) : 0;
      let s12 = pair ? start(c1 + c + 2, c + 2) : 0;
      let s13 = pair ? start(c1 + c + 3, c + 3) : 0;
      for (let k = 0, x = 0, b = bOff + c * bCol; k < K; k++, x += aK, b += bK) {
        const x0 = A[a0 + x];
        const x1 = A[a1 + x];
        const w0 = B[b];
        const w1 = B[b + bCol];
        const w2 = B[b + bCol2];
        const w3 = B[b + bCol3];
        s00 += x0 * w0;
        s01 += x0 * w1;
        s02 += x0 * w2;
        s03 += x0 * w3;
        s10 += x1 * w0;
        s11 += x1 * w1;
        s12 += x1 * w2;
        s13 += x1 * w3;
      }
      C[c0 + c] = s00;
      C[c0 + c + 1] = s01;
      C[c0 + c + 2] = s02;
      C[c0 + c + 3] = s03;
      if (pair) {
        C[c1 + c] = s10;
        C[c1 + c + 1] = s11;
        C[c1 + c + 2] = s12;
        C[c1 + c + 3] = s13;
      }
    }
    for (; c < cols; c++) {
      let s0 = start(c0 + c, c);
      let s1 = pair ? start(c1 + c, c) : 0;
      for (let k = 0, x = 0, b = bOff + c * bCol; k < K; k++, x += aK, b += bK) {
        const w = B[b];
        s0 += A[a0 + x] * w;
        s1 += A[a1 + x] * w;
      }
      C[c0 + c] = s0;
      if (pair) C[c1 + c] = s1;
    }
  }
}

/** @type {Kernels} */
export const jsKernels = {
  // C (rows, cols) = A (rows, K) B^T, B (cols, K), plus bias[col] (bias null: none) or plus C
  // itself (accumulate): both operands read along K, contiguously.
  gemmNT: (A, aOff, rows, K, B, bOff, cols, C, cOff, bias, biasOff, accumulate) =>
    gemm(A, aOff, K, 1, rows, K, B, bOff, 1, K, cols, C, cOff, bias, biasOff, accumulate),

  // C (rows, cols) = A B, or C + A B (accumulate), B (K, cols) from bOff, C from cOff; A
  // (rows, K) from 0 with A[r, k] at r aRow + k aK: A itself (aRow K, aK 1) or a matrix stored
  // transposed (aRow 1, aK its rows).
  gemmNN: (A, aRow, aK, rows, K, B, bOff, cols, C, cOff, accumulate) =>
    gemm(A, 0, aRow, aK, rows, K, B, bOff, cols, 1, cols, C, cOff, null, 0, accumulate),

  addTo(dst, src, n) {
    for (let i = 0; i < n; i++) dst[i] += src[i];
  },

  mulBy(dst, src, n) {
    for (let i = 0; i < n; i++) dst[i] *= src[i];
  },

  // sums[sumsOff + c] += the column sums of m (rows, cols).
  columnSums(m, rows, cols, sums, sumsOff) {
    for (let n = 0; n < rows; n++) {
      const r = n * cols;
      for (let c = 0; c < cols; c++) sums[sumsOff + c] += m[r + c];
    }
  },

  sumSquares(x, n) {
    let sum = 0;
    for (let i = 0; i < n; i++) sum += x[i] * x[i];
    return sum;
  },

  scale(x, n, c) {
    for (let i = 0; i < n; i++) x[i] *= c;
  },

  // One AdamW update of p[start..end) as torch.optim.AdamW makes it: decoupled weight decay
  // (shrink = 1 - rate x decay), bias-corrected moments (stepSize = rate / (1 - beta1^step),
  // correction2 = sqrt(1 - beta2^step)).
  adamw(p, g, m, v, start, end, shrink, stepSize, correction2) {
    for (let i = start; i < end; i++) {
      const gi = g[i];
      m[i] = BETA1 * m[i] + (1 - BETA1) * gi;
      v[i] = BETA2 * v[i] + (1 - BETA2) * gi * gi;
      const denominator = Math.sqrt(v[i]) / correction2 + ADAM_EPS;
      p[i] = p[i] * shrink - (stepSize * m[i]) / denominator;
    }
  },

  // Layer norm over rows of D: xhat = (x - mean) / sqrt(var + eps) (biased variance, as
  // torch.nn.LayerNorm), out = xhat * gain + shift. eps 0 and a constant row give NaN, as in
  // PyTorch.
  layerNorm(X, rows, D, eps, P, gOff, bOff, xhat, rstd, out) {
    for (let n = 0; n < rows; n++) {
      const r = n * D;
      let mean = 0;
      for (let d = 0; d < D; d++) mean += X[r + d];
      mean /= D;
      let variance = 0;
      for (let d = 0; d < D; d++) {
        const c = X[r + d] - mean;
        variance += c * c;
      }
      variance /= D;
      const rs = 1 / Math.sqrt(variance + eps);
      rstd[n] = rs;
      for (let d = 0; d < D; d++) {
        const h = (X[r + d] - mean) * rs;
        xhat[r + d] = h;
        out[r + d] = h * P[gOff + d] + P[bOff + d];
      }
    }
  },

  // The backward of `layerNorm`: dX = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)) with
  // dxhat = dOut gain; dgain += dOut xhat, dshift += dOut. dX is overwritten.
  layerNormBackward(dOut, rows, D, P, gOff, xhat, rstd, dX, G, dgOff, dbOff) {
    for (let n = 0; n < rows; n++) {
      const r = n * D;
      let sum = 0;
      let dot = 0;
      for (let d = 0; d < D; d++) {
        const g = dOut[r + d];
        const h = xhat[r + d];
        G[dgOff + d] += g * h;
        G[dbOff + d] += g;
        const dh = g * P[gOff + d];
        sum += dh;
        dot += dh * h;
      }
      sum /= D;
      dot /= D;
      const rs = rstd[n];
      for (let d = 0; d < D; d++) {
        dX[r + d] = rs * (dOut[r + d] * P[gOff + d] - sum - xhat[r + d] * dot);
      }
    }
  },

  // The exact GELU, g = u Phi(u) with Phi(u) = (1 + erf(u / sqrt 2)) / 2, and its slope
  // Phi(u) + u phi(u), for n values of u. Both come from one exp(-u^2 / 2), shared with erf.
  gelu(u, n, g, slope) {
    for (let i = 0; i < n; i++) {
      const v = u[i];
      const a = Math.abs(v) * SQRT1_2;
      let e;
      let erfA;
      if (a < ERF_SERIES_BELOW) {
        e = Math.exp(-a * a);
        erfA = TWO_OVER_SQRT_PI * e * erfSeries(a);
      } else {
        e = a > ERF_ONE ? 0 : Math.exp(-a * a);
        erfA = erf(a);
      }
      const cdf = 0.5 * (1 + (v < 0 ? -erfA : erfA));
      g[i] = v * cdf;
      slope[i] = cdf + v * INV_SQRT_2PI * e;
    }
  },

  // Causal multi-head attention over qkv (N, 3D) viewed as (B, T, 3, H, E); att (B, H, T, T)
  // keeps the softmax weights (row t: columns 0..t); y (N, D) the heads side by side.
  attention(qkv, att, y, batch, T, H, E, scale) {
    const D = H * E;
    const D3 = 3 * D;
    for (let b = 0; b < batch; b++) {
      for (let h = 0; h < H; h++) {
        const base = b * T * D3 + h * E;
        for (let t = 0; t < T; t++) {
          const q = base + t * D3;
          const row = ((b * H + h) * T + t) * T;
          let max = -Infinity;
          for (let s = 0; s <= t; s++) {
            const kk = base + s * D3 + D;
            let dot = 0;
            for (let e = 0; e < E; e++) dot += qkv[q + e] * qkv[kk + e];
            dot *= scale;
            att[row + s] = dot;
            if (dot > max) max = dot;
          }
          let sum = 0;
          for (let s = 0; s <= t; s++) {
            const w = Math.exp(att[row + s] - max);
            att[row + s] = w;
            sum += w;
          }
          const yr = (b * T + t) * D + h * E;
          for (let e = 0; e < E; e++) y[yr + e] = 0;
          for (let s = 0; s <= t; s++) {
            const w = att[row + s] / sum;
            att[row + s] = w;
            const vv = base + s * D3 + 2 * D;
            for (let e = 0; e < E; e++) y[yr + e] += w * qkv[vv + e];
          }
        }
      }
    }
  },

  // dqkv (N, 3D), overwritten, from dy (N, D): through y = softmax(q k^T scale) v. dp (T) is
  // scratch.
  attentionBackward(qkv, att, dy, dqkv, dp, batch, T, H, E, scale) {
    const D = H * E;
    const D3 = 3 * D;
    dqkv.fill(0, 0, batch * T * D3);
    for (let b = 0; b < batch; b++) {
      for (let h = 0; h < H; h++) {
        const base = b * T * D3 + h * E;
        for (let t = 0; t < T; t++) {
          const q = base + t * D3;
          const row = ((b * H + h) * T + t) * T;
          const yr = (b * T + t) * D + h * E;
          let dot = 0;
          for (let s = 0; s <= t; s++) {
            const vv = base + s * D3 + 2 * D;
            let g = 0;
            for (let e = 0; e < E; e++) {
              g += dy[yr + e] * qkv[vv + e];
              dqkv[vv + e] += att[row + s] * dy[yr + e];
            }
            dp[s] = g;
            dot += att[row + s] * g;
          }
          for (let s = 0; s <= t; s++) {
            const ds = att[row + s] * (dp[s] - dot) * scale;
            if (ds === 0) continue;
            const kk = base + s * D3 + D;
            for (let e = 0; e < E; e++) {
              dqkv[q + e] += ds * qkv[kk + e];
              dqkv[kk + e] += ds * qkv[q + e];
            }
          }
        }
      }
    }
  },
};

// ---- the WebAssembly path ------------------------------------------------------------------

// The smallest module that uses a SIMD instruction: (func (result v128) v128.const 0). An
// engine that validates it runs kernels.wasm.
const SIMD_PROBE = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 22, 1, 20, 0, 253, 12,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 11,
]);
const WASM_URL = new URL("./kernels.wasm", import.meta.url);
const PAGE = 65536; // bytes in a WebAssembly page
// The module's own constants (its exp's table) live in its first page; the model's buffers
// start after it, 16-byte aligned for the v128 loads.
const HEAP_BASE = PAGE;
const ALIGN = 2; // doubles in 16 bytes

/** The names of wasm/lab_kernels.ts's exports, as model.js calls them.
 * @typedef {{ memory: WebAssembly.Memory } & Record<string, Function>} WasmExports */

// The bytes of kernels.wasm: fetched in a browser, read from the file where the module itself
// was loaded from a file (Node, in the tests and the benchmark).
/** @returns {Promise<ArrayBuffer>} */
async function wasmBytes() {
  if (WASM_URL.protocol === "file:") {
    const fs = "node:fs/promises"; // a variable: the browser's type check knows no Node
    const { readFile } = await import(fs);
    /** @type {Uint8Array} */
    const bytes = await readFile(WASM_URL);
    return new Uint8Array(bytes).buffer; // a copy in an ArrayBuffer of its own
  }
  const response = await fetch(WASM_URL);
  if (!response.ok) throw new Error(`kernels.wasm: HTTP ${response.status}`);
  return response.arrayBuffer();
}

/** @returns {Promise<{ module: WebAssembly.Module | null, why: string }>} */
async function compileWasm() {
  if (typeof WebAssembly !== "object" || !WebAssembly.validate(SIMD_PROBE)) {
    return { module: null, why: "this engine has no WebAssembly SIMD" };
  }
  try {
    return { module: await WebAssembly.compile(await wasmBytes()), why: "" };
  } catch (error) {
    // A Content-Security-Policy without 'wasm-unsafe-eval', a failed fetch: plain JavaScript.
    return { module: null, why: error instanceof Error ? error.message : String(error) };
  }
}

const compiled = await compileWasm();

/** The path this engine runs: "wasm" where the module compiled, else "js".
 * @type {KernelPath} */
export const bestPath = compiled.module === null ? "js" : "wasm";
/** Why the WebAssembly path is not taken ("" when it is). */
export const fallbackReason = compiled.why;

/** The paths this engine can run, best first.
 * @returns {KernelPath[]} */
export function availablePaths() {
  return bestPath === "wasm" ? ["wasm", "js"] : ["js"];
}

// The WebAssembly kernels over one instance's memory: each array's place in it, in bytes.
/** @param {WasmExports} x @returns {Kernels} */
function wasmKernels(x) {
  const at = (/** @type {Float64Array} */ a, /** @type {number} */ offset) =>
    a.byteOffset + 8 * offset;
  return {
    gemmNT: (A, aOff, rows, K, B, bOff, cols, C, cOff, bias, biasOff, accumulate) =>
      x.gemmNT(at(A, aOff), rows, K, at(B, bOff), cols, at(C, cOff),
        bias === null ? 0 : at(bias, biasOff), accumulate ? 1 : 0),
    gemmNN: (A, aRow, aK, rows, K, B, bOff, cols, C, cOff, accumulate) =>
      x.gemmNN(at(A, 0), aRow, aK, rows, K, at(B, bOff), cols, at(C, cOff), accumulate ? 1 : 0),
    addTo: (dst, src, n) => x.addTo(at(dst, 0), at(src, 0), n),
    mulBy: (dst, src, n) => x.mulBy(at(dst, 0), at(src, 0), n),
    columnSums: (m, rows, cols, sums, sumsOff) =>
      x.columnSums(at(m, 0), rows, cols, at(sums, sumsOff)),
    layerNorm: (X, rows, D, eps, P, gOff, bOff, xhat, rstd, out) =>
      x.layerNorm(at(X, 0), rows, D, eps, at(P, gOff), at(P, bOff), at(xhat, 0), at(rstd, 0),
        at(out, 0)),
    layerNormBackward: (dOut, rows, D, P, gOff, xhat, rstd, dX, G, dgOff, dbOff) =>
      x.layerNormBackward(at(dOut, 0), rows, D, at(P, gOff), at(xhat, 0), at(rstd, 0),
        at(dX, 0), at(G, dgOff), at(G, dbOff)),
    sumSquares: (v, n) => x.sumSquares(at(v, 0), n),
    scale: (v, n, c) => x.scale(at(v, 0), n, c),
    adamw: (p, g, m, v, start, end, shrink, stepSize, correction2) =>
      x.adamw(at(p, start), at(g, start), at(m, start), at(v, start), end - start, shrink,
        stepSize, correction2),
    gelu: (u, n, g, slope) => x.gelu(at(u, 0), n, at(g, 0), at(slope, 0)),
    attention: (qkv, att, y, batch, T, H, E, scale) =>
      x.attention(at(qkv, 0), at(att, 0), at(y, 0), batch, T, H, E, scale),
    attentionBackward: (qkv, att, dy, dqkv, dp, batch, T, H, E, scale) =>
      x.attentionBackward(at(qkv, 0), at(att, 0), at(dy, 0), at(dqkv, 0), at(dp, 0), batch, T,
        H, E, scale),
  };
}

// A heap of `doubles` doubles for one model on `path` (default: the best this engine runs).
// The WebAssembly path instantiates the compiled module once per heap, with a memory grown
// once to its size: the views `take` hands out stay valid, as the memory never grows again.
/** @param {number} doubles @param {KernelPath} [path] @returns {Heap} */
export function createHeap(doubles, path = bestPath) {
  let next = 0;
  if (path === "js") {
    const memory = new Float64Array(doubles);
    const take = (/** @type {number} */ n) => {
      const view = memory.subarray(next, next + n);
      next += padded(n);
      return view;
    };
    return { path, kernels: jsKernels, take };
  }
  if (compiled.module === null) {
    throw new Error(`the WebAssembly path is not available: ${fallbackReason}`);
  }
  const instance = new WebAssembly.Instance(compiled.module, {});
  const x = /** @type {WasmExports} */ (/** @type {unknown} */ (instance.exports));
  const bytes = HEAP_BASE + 8 * doubles;
  const have = x.memory.buffer.byteLength;
  if (bytes > have) x.memory.grow(Math.ceil((bytes - have) / PAGE));
  const buffer = x.memory.buffer;
  const take = (/** @type {number} */ n) => {
    const view = new Float64Array(buffer, HEAP_BASE + 8 * next, n);
    next += padded(n);
    return view;
  };
  return { path, kernels: wasmKernels(x), take };
}

// The doubles `take` uses for an array of n: each array starts on a 16-byte boundary.
/** @param {number} n @returns {number} */
function padded(n) {
  return n + ((ALIGN - (n % ALIGN)) % ALIGN);
}

// How many doubles a heap needs to hand out arrays of these lengths.
/** @param {number[]} lengths @returns {number} */
export function heapSize(lengths) {
  return lengths.reduce((sum, n) => sum + padded(n), 0);
}
