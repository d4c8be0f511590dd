// The lab's model (docs/lab.md, "The model"): the block of training/model.py in double
// precision, forward and backward written out by hand. No dependencies: a few dozen kilobytes
// of plain loops over Float64Arrays run the same on every engine, and at this size (d_model
// 32, a few blocks) a library's kernels would not pay for their bytes.
//
// Shapes: B sequences, T = 2L positions, N = B x T rows, D d_model, H heads, E = D / H,
// R = mlp_ratio x D, V1 = vocab_size + 1 (the separator is vocab_size), M = B x L copied rows.
// Every buffer is allocated once per model for at most `maxBatch` sequences; an update
// allocates no arrays. Matrices are row-major; a Linear weight is (out, in), as PyTorch
// stores it.

import { Lab32, WEIGHTS } from "./random.js";

/** The model's part of a LabConfig (docs/lab.md), snake_case as the server sends it; eps is
 * null exactly when layer norm is off.
 * @typedef {{ depth: number, copy_length: number, vocab_size: number, d_model: number,
 *   n_heads: number, mlp_ratio: number, init: string, layernorm: boolean, residual: boolean,
 *   eps: number | null }} ModelConfig */
/** @typedef {"embedding" | "weight" | "bias" | "gain" | "shift"} ParameterKind */
/** @typedef {{ name: string, shape: number[], kind: ParameterKind }} ParameterSpec */
/** A parameter with its place in the model's flat arrays: `size` entries from `offset`.
 * @typedef {ParameterSpec & { size: number, offset: number }} ParameterShape */
/** What one block's forward pass keeps for the backward pass. The norms' buffers (xhat, 1/std,
 * output) are null without layer norm, and read only with it.
 * @typedef {{ xhat1: Float64Array | null, rstd1: Float64Array | null, a1: Float64Array | null,
 *   qkv: Float64Array, att: Float64Array, y: Float64Array, mid: Float64Array,
 *   xhat2: Float64Array | null, rstd2: Float64Array | null, a2: Float64Array | null,
 *   u: Float64Array, g: Float64Array, slope: Float64Array }} BlockBuffers */
/** The transposed copies linearBackward multiplies.
 * @typedef {{ wT: Float64Array, yT: Float64Array, xT: Float64Array }} Scratch */

const GPT2_STD = 0.02; // GPT-2's initialiser range, as training/model.py
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
    const twoA2 = 2 * a * a;
    let term = a;
    let sum = a;
    for (let n = 1; term > sum * SERIES_TOLERANCE && n < SERIES_TERMS; n++) {
      term *= twoA2 * INV_ODD[n];
      sum += term;
    }
    const value = TWO_OVER_SQRT_PI * Math.exp(-a * a) * sum;
    return x < 0 ? -value : value;
  }
  if (a !== a) return x; // NaN
  if (a > ERF_ONE) return x > 0 ? 1 : -1;
  let f = a;
  for (let k = ERF_FRACTION_TERMS; k >= 1; k--) f = a + (k * 0.5) / f;
  const erfc = (Math.exp(-a * a) * INV_SQRT_PI) / f;
  return x > 0 ? 1 - erfc : erfc - 1;
}

// The exact GELU, g = u Phi(u) with Phi(u) = (1 + erf(u / sqrt 2)) / 2, and its slope
// Phi(u) + u phi(u), for n values of u. Both come from one exp(-u^2 / 2), shared with erf.
/** @param {Float64Array} u @param {number} n @param {Float64Array} g @param {Float64Array} slope */
function geluForward(u, n, g, slope) {
  for (let i = 0; i < n; i++) {
    const v = u[i];
    const a = Math.abs(v) * SQRT1_2;
    let e;
    let erfA;
    if (a < ERF_SERIES_BELOW) {
      const twoA2 = 2 * a * a;
      let term = a;
      let sum = a;
      for (let k = 1; term > sum * SERIES_TOLERANCE && k < SERIES_TERMS; k++) {
        term *= twoA2 * INV_ODD[k];
        sum += term;
      }
      e = Math.exp(-a * a);
      erfA = TWO_OVER_SQRT_PI * e * sum;
    } else {
      e = a > ERF_ONE ? 0 : Math.exp(-a * a);
      erfA = erf(a);
    }
    const cdf = 0.5 * (1 + (v < 0 ? -erfA : erfA));
    g[i] = v * cdf;
    slope[i] = cdf + v * INV_SQRT_2PI * e;
  }
}

// The parameters in the order of docs/lab.md ("Parameters, in order"): name, shape, kind.
// kind: "embedding" | "weight" | "bias" | "gain" | "shift"; AdamW decays embeddings and
// weights (two or more dimensions) only.
/** @param {ModelConfig} config @returns {ParameterSpec[]} */
export function parameterShapes(config) {
  const D = config.d_model;
  const R = config.mlp_ratio * D;
  const V1 = config.vocab_size + 1;
  const T = 2 * config.copy_length;
  const norms = config.layernorm;
  /** @type {ParameterSpec[]} */
  const shapes = [
    { name: "token_embedding", shape: [V1, D], kind: "embedding" },
    { name: "position_embedding", shape: [T, D], kind: "embedding" },
  ];
  const norm = (/** @type {string} */ prefix) =>
    /** @type {ParameterSpec[]} */ (norms
      ? [
          { name: `${prefix}.weight`, shape: [D], kind: "gain" },
          { name: `${prefix}.bias`, shape: [D], kind: "shift" },
        ]
      : []);
  for (let l = 0; l < config.depth; l++) {
    const p = `blocks.${l}`;
    shapes.push(
      ...norm(`${p}.norm_attn`),
      { name: `${p}.attn.qkv.weight`, shape: [3 * D, D], kind: "weight" },
      { name: `${p}.attn.qkv.bias`, shape: [3 * D], kind: "bias" },
      { name: `${p}.attn.out.weight`, shape: [D, D], kind: "weight" },
      { name: `${p}.attn.out.bias`, shape: [D], kind: "bias" },
      ...norm(`${p}.norm_mlp`),
      { name: `${p}.mlp.up.weight`, shape: [R, D], kind: "weight" },
      { name: `${p}.mlp.up.bias`, shape: [R], kind: "bias" },
      { name: `${p}.mlp.down.weight`, shape: [D, R], kind: "weight" },
      { name: `${p}.mlp.down.bias`, shape: [D], kind: "bias" },
    );
  }
  shapes.push(...norm("final_norm"), { name: "head.weight", shape: [V1, D], kind: "weight" }, {
    name: "head.bias",
    shape: [V1],
    kind: "bias",
  });
  return shapes;
}

const INITS = new Set(["gpt2", "pytorch"]);

/** @param {ModelConfig} config */
function checkConfig(config) {
  const fields = /** @type {const} */ (
    ["depth", "copy_length", "vocab_size", "d_model", "n_heads", "mlp_ratio"]);
  for (const field of fields) {
    if (!Number.isInteger(config[field]) || config[field] < 1) {
      throw new RangeError(`config.${field} must be a positive integer, not ${config[field]}`);
    }
  }
  if (config.d_model % config.n_heads) {
    throw new RangeError(`d_model ${config.d_model} is not divisible by n_heads ${config.n_heads}`);
  }
  if (!INITS.has(config.init)) throw new RangeError(`unknown init ${config.init}`);
  // A null eps compares as 0 here, as Number(null) reads it in the constructor.
  if (config.layernorm && !(/** @type {number} */ (config.eps) >= 0)) {
    throw new RangeError(`layer norm needs an eps >= 0, not ${config.eps}`);
  }
}

// ---- kernels -------------------------------------------------------------------------------

// C (rows, cols) = A (rows, K) B^T, B (cols, K), plus bias[col] (bias null: none) or plus C
// itself (accumulate). Both operands are read along K, contiguously; each pass computes a 2 x 4
// tile of C, so six loads feed eight multiply-adds and the tile stays in registers.
/** @param {Float64Array} A @param {number} aOff @param {number} rows @param {number} K
 * @param {Float64Array} B @param {number} bOff @param {number} cols
 * @param {Float64Array} C @param {number} cOff
 * @param {Float64Array | null} bias @param {number} biasOff @param {boolean} accumulate */
function gemmNT(A, aOff, rows, K, B, bOff, cols, C, cOff, bias, biasOff, accumulate) {
  const rows2 = rows - (rows % 2);
  const cols4 = cols - (cols % 4);
  const start = (/** @type {number} */ r, /** @type {number} */ c) =>
    accumulate ? C[cOff + r * cols + c] : bias === null ? 0 : bias[biasOff + c];
  for (let r = 0; r < rows2; r += 2) {
    const a0 = aOff + r * K;
    const a1 = a0 + K;
    const c0 = cOff + r * cols;
    const c1 = c0 + cols;
    let c = 0;
    for (; c < cols4; c += 4) {
      const b0 = bOff + c * K;
      const b1 = b0 + K;
      const b2 = b1 + K;
      const b3 = b2 + K;
      let s00 = start(r, c);
      let s01 = start(r, c + 1);
      let s02 = start(r, c + 2);
      let s03 = start(r, c + 3);
      let s10 = start(r + 1, c);
      let s11 = start(r + 1, c + 1);
      let s12 = start(r + 1, c + 2);
      let s13 = start(r + 1, c + 3);
      for (let k = 0; k < K; k++) {
        const x0 = A[a0 + k];
        const x1 = A[a1 + k];
        const w0 = B[b0 + k];
        const w1 = B[b1 + k];
        const w2 = B[b2 + k];
        const w3 = B[b3 + k];
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
      C[c1 + c] = s10;
      C[c1 + c + 1] = s11;
      C[c1 + c + 2] = s12;
      C[c1 + c + 3] = s13;
    }
    for (; c < cols; c++) {
      const b0 = bOff + c * K;
      let s0 = start(r, c);
      let s1 = start(r + 1, c);
      for (let k = 0; k < K; k++) {
        const w = B[b0 + k];
        s0 += A[a0 + k] * w;
        s1 += A[a1 + k] * w;
      }
      C[c0 + c] = s0;
      C[c1 + c] = s1;
    }
  }
  for (let r = rows2; r < rows; r++) {
    const a0 = aOff + r * K;
    for (let c = 0; c < cols; c++) {
      const b0 = bOff + c * K;
      let s = start(r, c);
      for (let k = 0; k < K; k++) s += A[a0 + k] * B[b0 + k];
      C[cOff + r * cols + c] = s;
    }
  }
}

// dst[dstOff .. dstOff + n) = src[srcOff .. srcOff + n), without a view object per call.
/** @param {Float64Array} src @param {number} srcOff @param {Float64Array} dst
 * @param {number} dstOff @param {number} n */
function copy(src, srcOff, dst, dstOff, n) {
  for (let i = 0; i < n; i++) dst[dstOff + i] = src[srcOff + i];
}

// dst (cols, rows) = src (rows, cols)^T, src read from srcOff.
/** @param {Float64Array} src @param {number} srcOff @param {number} rows @param {number} cols
 * @param {Float64Array} dst */
function transpose(src, srcOff, rows, cols, dst) {
  for (let r = 0; r < rows; r++) {
    const s = srcOff + r * cols;
    for (let c = 0; c < cols; c++) dst[c * rows + r] = src[s + c];
  }
}

// Y (rows, O) = X (rows, I) W^T + bias, W (O, I): a torch.nn.Linear.
/** @param {Float64Array} X @param {number} rows @param {number} I @param {Float64Array} W
 * @param {number} wOff @param {Float64Array} bias @param {number} bOff @param {number} O
 * @param {Float64Array} Y */
function linear(X, rows, I, W, wOff, bias, bOff, O, Y) {
  gemmNT(X, 0, rows, I, W, wOff, O, Y, 0, bias, bOff, false);
}

// The backward of `linear` for dY (rows, O): dX (rows, I) = dY W (overwritten; skipped when
// dX is null), dW += dY^T X, dbias += column sums of dY. Both products run through gemmNT on
// transposed copies (scratch.wT: I x O, scratch.yT: O x rows, scratch.xT: I x rows), so every
// inner loop is a contiguous dot product.
/** @param {Float64Array} dY @param {number} rows @param {number} O @param {Float64Array} X
 * @param {number} I @param {Float64Array} W @param {number} wOff @param {Float64Array | null} dX
 * @param {Float64Array} dW @param {Float64Array} dbias @param {number} bOff
 * @param {Scratch} scratch */
function linearBackward(dY, rows, O, X, I, W, wOff, dX, dW, dbias, bOff, scratch) {
  for (let n = 0; n < rows; n++) {
    const yr = n * O;
    for (let o = 0; o < O; o++) dbias[bOff + o] += dY[yr + o];
  }
  if (dX !== null) {
    transpose(W, wOff, O, I, scratch.wT);
    gemmNT(dY, 0, rows, O, scratch.wT, 0, I, dX, 0, null, 0, false);
  }
  transpose(dY, 0, rows, O, scratch.yT);
  transpose(X, 0, rows, I, scratch.xT);
  gemmNT(scratch.yT, 0, O, rows, scratch.xT, 0, I, dW, wOff, null, 0, true);
}

// Layer norm over rows of D: xhat = (x - mean) / sqrt(var + eps) (biased variance, as
// torch.nn.LayerNorm), out = xhat * gain + shift. eps 0 and a constant row give NaN, as in
// PyTorch.
/** @param {Float64Array} X @param {number} rows @param {number} D @param {number} eps
 * @param {Float64Array} P @param {number} gOff @param {number} bOff @param {Float64Array} xhat
 * @param {Float64Array} rstd @param {Float64Array} out */
function layerNorm(X, rows, D, eps, P, gOff, bOff, xhat, rstd, out) {
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
}

// The backward of `layerNorm`: dX = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)) with
// dxhat = dOut gain; dgain += dOut xhat, dshift += dOut. dX is overwritten.
/** @param {Float64Array} dOut @param {number} rows @param {number} D @param {Float64Array} P
 * @param {number} gOff @param {Float64Array} xhat @param {Float64Array} rstd
 * @param {Float64Array} dX @param {Float64Array} G @param {number} dgOff @param {number} dbOff */
function layerNormBackward(dOut, rows, D, P, gOff, xhat, rstd, dX, G, dgOff, dbOff) {
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
}

// ---- the model -----------------------------------------------------------------------------

export class LabModel {
  // config: the LabConfig's snake_case fields (docs/lab.md); maxBatch: the most sequences one
  // forward pass takes.
  /** @param {ModelConfig} config @param {number} maxBatch */
  constructor(config, maxBatch) {
    checkConfig(config);
    this.config = config;
    const D = config.d_model;
    const L = config.copy_length;
    const T = 2 * L;
    const R = config.mlp_ratio * D;
    const V1 = config.vocab_size + 1;
    const H = config.n_heads;
    this.D = D;
    this.L = L;
    this.T = T;
    this.R = R;
    this.V1 = V1;
    this.H = H;
    this.E = D / H;
    this.depth = config.depth;
    this.maxBatch = maxBatch;
    this.layernorm = Boolean(config.layernorm);
    this.residual = Boolean(config.residual);
    this.eps = this.layernorm ? Number(config.eps) : 0;

    // One flat array for all parameters (and one for their gradients): AdamW and the
    // clipping are one loop each; `parameters` holds a named view of each tensor.
    // Each shape's size and offset are filled in just below.
    this.shapes = /** @type {ParameterShape[]} */ (parameterShapes(config));
    /** @type {Record<string, number>} */
    this.offsets = {};
    let size = 0;
    for (const s of this.shapes) {
      s.size = s.shape.reduce((a, b) => a * b, 1);
      s.offset = size;
      this.offsets[s.name] = size;
      size += s.size;
    }
    this.size = size;
    // Each block's offsets by the name within the block ("attn.qkv.weight"), looked up once.
    this.blockOffsets = Array.from({ length: this.depth }, (_, l) => {
      const prefix = `blocks.${l}.`;
      /** @type {Record<string, number>} */
      const within = {};
      for (const s of this.shapes) {
        if (s.name.startsWith(prefix)) within[s.name.slice(prefix.length)] = s.offset;
      }
      return within;
    });
    this.params = new Float64Array(size);
    this.grads = new Float64Array(size);
    /** @type {Record<string, Float64Array>} */
    this.parameters = {};
    /** @type {Record<string, Float64Array>} */
    this.gradients = {};
    for (const s of this.shapes) {
      this.parameters[s.name] = this.params.subarray(s.offset, s.offset + s.size);
      this.gradients[s.name] = this.grads.subarray(s.offset, s.offset + s.size);
    }

    const N = maxBatch * T;
    const M = maxBatch * L;
    /** @param {number} n @returns {Float64Array} */
    const f64 = (n) => new Float64Array(n);
    // Per block, what the backward pass reads: the block's input, the normed inputs of both
    // sublayers (and their xhat, 1/std), qkv, the attention weights, the heads' output, the
    // stream between the sublayers, the MLP's pre- and post-GELU activations.
    this.xs = Array.from({ length: this.depth + 1 }, () => f64(N * D));
    /** @type {BlockBuffers[]} */
    this.blocks = Array.from({ length: this.depth }, () => ({
      xhat1: this.layernorm ? f64(N * D) : null,
      rstd1: this.layernorm ? f64(N) : null,
      a1: this.layernorm ? f64(N * D) : null,
      qkv: f64(N * 3 * D),
      att: f64(maxBatch * H * T * T),
      y: f64(N * D),
      mid: f64(N * D),
      xhat2: this.layernorm ? f64(N * D) : null,
      rstd2: this.layernorm ? f64(N) : null,
      a2: this.layernorm ? f64(N * D) : null,
      u: f64(N * R),
      g: f64(N * R),
      slope: f64(N * R), // d gelu(u) / du
    }));
    this.rows = f64(M * D); // the copied rows of the last block's output
    this.fxhat = this.layernorm ? f64(M * D) : null;
    this.frstd = this.layernorm ? f64(M) : null;
    this.fout = this.layernorm ? f64(M * D) : this.rows;
    this.logits = f64(M * V1);
    this.dlogits = f64(M * V1);
    /** @type {Int32Array | null} */
    this.inputs = null; // the last forward()'s inputs, (batch, T)
    this.batch = 0;
    // Backward scratch, shared by the blocks (the pass visits one at a time).
    this.dx = f64(N * D);
    this.dmid = f64(N * D);
    this.da = f64(N * D);
    this.dy = f64(N * D);
    this.dqkv = f64(N * 3 * D);
    this.du = f64(N * R);
    this.drows = f64(M * D);
    this.dfout = f64(M * D);
    this.dp = f64(T);
    const widest = Math.max(3 * D, R, V1);
    this.scratch = { wT: f64(widest * Math.max(D, R)), yT: f64(N * widest), xT: f64(N * widest) };
  }

  // Fill the parameters from stream WEIGHTS of `seed` (docs/lab.md, "Initialisation").
  /** @param {number} seed */
  initialise(seed) {
    const random = new Lab32(seed, WEIGHTS);
    const gpt2 = this.config.init === "gpt2";
    const scaled = GPT2_STD / Math.sqrt(2 * this.depth);
    for (const s of this.shapes) {
      const view = this.parameters[s.name];
      if (s.kind === "gain") view.fill(1);
      else if (s.kind === "shift") view.fill(0);
      else if (gpt2) {
        if (s.kind === "bias") view.fill(0);
        else {
          const std =
            s.name.endsWith("attn.out.weight") || s.name.endsWith("mlp.down.weight")
              ? scaled
              : GPT2_STD;
          for (let i = 0; i < s.size; i++) view[i] = random.normal() * std;
        }
      } else if (s.kind === "embedding") {
        for (let i = 0; i < s.size; i++) view[i] = random.normal();
      } else {
        // A Linear's weight and then its bias, both U(-1/sqrt(fan_in), 1/sqrt(fan_in)); the
        // bias is the next shape, and fan_in is its weight's second dimension.
        const fanIn = s.kind === "weight" ? s.shape[1] : this._fanIn(s);
        const bound = 1 / Math.sqrt(fanIn);
        for (let i = 0; i < s.size; i++) view[i] = (2 * random.uniform() - 1) * bound;
      }
    }
  }

  /** @param {ParameterShape} biasShape @returns {number} */
  _fanIn(biasShape) {
    // Every bias follows its weight in parameterShapes.
    const weight = /** @type {ParameterShape} */ (
      this.shapes.find((s) => s.name === biasShape.name.replace(/bias$/, "weight")));
    return weight.shape[1];
  }

  // The mean cross-entropy over the copied half of `batch` sequences: inputs (batch, T) and
  // targets (batch, L), Int32Arrays. Keeps what backward() needs; `this.correct` is the number
  // of copied tokens whose argmax (first maximum on ties) is the target.
  /** @param {Int32Array} inputs @param {Int32Array} targets @param {number} batch
   * @returns {number} */
  forward(inputs, targets, batch) {
    if (batch > this.maxBatch) throw new RangeError(`batch ${batch} > ${this.maxBatch}`);
    const { D, T, L, R, V1, E } = this;
    const N = batch * T;
    const P = this.params;
    const o = this.offsets;
    this.batch = batch;
    this.inputs = inputs;

    // Embeddings: x0 (N, D) = token_embedding[token] + position_embedding[t].
    const x0 = this.xs[0];
    const tokOff = o.token_embedding;
    const posOff = o.position_embedding;
    for (let n = 0; n < N; n++) {
      const t = n % T;
      const te = tokOff + inputs[n] * D;
      const pe = posOff + t * D;
      const r = n * D;
      for (let d = 0; d < D; d++) x0[r + d] = P[te + d] + P[pe + d];
    }

    const scale = 1 / Math.sqrt(E);
    for (let l = 0; l < this.depth; l++) {
      const x = this.xs[l];
      const out = this.xs[l + 1];
      const k = this.blocks[l];
      const ob = this.blockOffsets[l];
      // The norms' buffers: not null with layer norm on (BlockBuffers).
      let a1 = x;
      if (this.layernorm) {
        layerNorm(x, N, D, this.eps, P, ob["norm_attn.weight"], ob["norm_attn.bias"],
          /** @type {Float64Array} */ (k.xhat1), /** @type {Float64Array} */ (k.rstd1),
          /** @type {Float64Array} */ (k.a1));
        a1 = /** @type {Float64Array} */ (k.a1);
      }
      linear(a1, N, D, P, ob["attn.qkv.weight"], P, ob["attn.qkv.bias"], 3 * D, k.qkv);
      this._attention(k.qkv, k.att, k.y, batch, scale);
      // mid = x + y W_out^T + b (residual) or y W_out^T + b.
      linear(k.y, N, D, P, ob["attn.out.weight"], P, ob["attn.out.bias"], D, k.mid);
      if (this.residual) for (let i = 0; i < N * D; i++) k.mid[i] += x[i];
      let a2 = k.mid;
      if (this.layernorm) {
        layerNorm(k.mid, N, D, this.eps, P, ob["norm_mlp.weight"], ob["norm_mlp.bias"],
          /** @type {Float64Array} */ (k.xhat2), /** @type {Float64Array} */ (k.rstd2),
          /** @type {Float64Array} */ (k.a2));
        a2 = /** @type {Float64Array} */ (k.a2);
      }
      linear(a2, N, D, P, ob["mlp.up.weight"], P, ob["mlp.up.bias"], R, k.u);
      geluForward(k.u, N * R, k.g, k.slope);
      linear(k.g, N, R, P, ob["mlp.down.weight"], P, ob["mlp.down.bias"], D, out);
      if (this.residual) for (let i = 0; i < N * D; i++) out[i] += k.mid[i];
    }

    // The copied rows (positions L..2L-1 of each sequence), the final norm, the head.
    const M = batch * L;
    const last = this.xs[this.depth];
    for (let b = 0; b < batch; b++) {
      copy(last, (b * T + L) * D, this.rows, b * L * D, L * D);
    }
    if (this.layernorm) {
      layerNorm(this.rows, M, D, this.eps, P, o["final_norm.weight"], o["final_norm.bias"],
        /** @type {Float64Array} */ (this.fxhat), /** @type {Float64Array} */ (this.frstd),
        this.fout);
    }
    linear(this.fout, M, D, P, o["head.weight"], P, o["head.bias"], V1, this.logits);

    // Mean cross-entropy; dlogits = (softmax - onehot) / M for backward().
    const logits = this.logits;
    const dl = this.dlogits;
    let total = 0;
    let correct = 0;
    for (let m = 0; m < M; m++) {
      const r = m * V1;
      const target = targets[m];
      let max = logits[r];
      let argmax = 0;
      for (let v = 1; v < V1; v++) {
        if (logits[r + v] > max) {
          max = logits[r + v];
          argmax = v;
        }
      }
      if (argmax === target) correct++;
      let sum = 0;
      for (let v = 0; v < V1; v++) {
        const e = Math.exp(logits[r + v] - max);
        dl[r + v] = e;
        sum += e;
      }
      total += Math.log(sum) + max - logits[r + target];
      for (let v = 0; v < V1; v++) dl[r + v] = dl[r + v] / sum / M;
      dl[r + target] -= 1 / M;
    }
    /** @type {number} */
    this.correct = correct;
    return total / M;
  }

  // Causal multi-head attention over qkv (N, 3D) viewed as (B, T, 3, H, E); att (B, H, T, T)
  // keeps the softmax weights (row t: columns 0..t); y (N, D) the heads side by side.
  /** @param {Float64Array} qkv @param {Float64Array} att @param {Float64Array} y
   * @param {number} batch @param {number} scale */
  _attention(qkv, att, y, batch, scale) {
    const { D, T, H, E } = this;
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
  }

  // dqkv (N, 3D) from dy (N, D): through y = softmax(q k^T scale) v.
  /** @param {Float64Array} qkv @param {Float64Array} att @param {Float64Array} dy
   * @param {Float64Array} dqkv @param {number} batch @param {number} scale */
  _attentionBackward(qkv, att, dy, dqkv, batch, scale) {
    const { D, T, H, E } = this;
    const D3 = 3 * D;
    const dp = this.dp;
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
  }

  // The gradient of the last forward()'s loss with respect to every parameter, into `grads`.
  backward() {
    const { D, T, L, R, V1, E } = this;
    const batch = this.batch;
    const N = batch * T;
    const M = batch * L;
    const P = this.params;
    const G = this.grads;
    const o = this.offsets;
    G.fill(0);

    // Head and final norm, on the copied rows; then scattered into the stream's gradient.
    linearBackward(this.dlogits, M, V1, this.fout, D, P, o["head.weight"], this.dfout, G,
      G, o["head.bias"], this.scratch);
    let drows = this.dfout;
    if (this.layernorm) {
      layerNormBackward(this.dfout, M, D, P, o["final_norm.weight"],
        /** @type {Float64Array} */ (this.fxhat), /** @type {Float64Array} */ (this.frstd),
        this.drows, G, o["final_norm.weight"], o["final_norm.bias"]);
      drows = this.drows;
    }
    const dx = this.dx;
    dx.fill(0, 0, N * D);
    for (let b = 0; b < batch; b++) {
      copy(drows, b * L * D, dx, (b * T + L) * D, L * D);
    }

    const scale = 1 / Math.sqrt(E);
    for (let l = this.depth - 1; l >= 0; l--) {
      const x = this.xs[l];
      const k = this.blocks[l];
      const ob = this.blockOffsets[l];
      // dx holds d(block output). MLP: out = [mid +] down(gelu(up(a2))).
      linearBackward(dx, N, D, k.g, R, P, ob["mlp.down.weight"], this.du, G, G,
        ob["mlp.down.bias"], this.scratch);
      const du = this.du;
      const slope = k.slope;
      for (let i = 0; i < N * R; i++) du[i] *= slope[i];
      const a2 = this.layernorm ? /** @type {Float64Array} */ (k.a2) : k.mid;
      const dmid = this.dmid;
      linearBackward(du, N, R, a2, D, P, ob["mlp.up.weight"], this.da, G, G,
        ob["mlp.up.bias"], this.scratch);
      if (this.layernorm) {
        layerNormBackward(this.da, N, D, P, ob["norm_mlp.weight"],
          /** @type {Float64Array} */ (k.xhat2), /** @type {Float64Array} */ (k.rstd2), dmid, G,
          ob["norm_mlp.weight"], ob["norm_mlp.bias"]);
      } else {
        copy(this.da, 0, dmid, 0, N * D);
      }
      if (this.residual) for (let i = 0; i < N * D; i++) dmid[i] += dx[i];

      // Attention: mid = [x +] out(attn(qkv(a1))).
      linearBackward(dmid, N, D, k.y, D, P, ob["attn.out.weight"], this.dy, G, G,
        ob["attn.out.bias"], this.scratch);
      this._attentionBackward(k.qkv, k.att, this.dy, this.dqkv, batch, scale);
      const a1 = this.layernorm ? /** @type {Float64Array} */ (k.a1) : x;
      linearBackward(this.dqkv, N, 3 * D, a1, D, P, ob["attn.qkv.weight"], this.da, G, G,
        ob["attn.qkv.bias"], this.scratch);
      if (this.layernorm) {
        layerNormBackward(this.da, N, D, P, ob["norm_attn.weight"],
          /** @type {Float64Array} */ (k.xhat1), /** @type {Float64Array} */ (k.rstd1), dx, G,
          ob["norm_attn.weight"], ob["norm_attn.bias"]);
      } else {
        copy(this.da, 0, dx, 0, N * D);
      }
      if (this.residual) for (let i = 0; i < N * D; i++) dx[i] += dmid[i];
    }

    // Embeddings: every row's gradient goes to its token's row and its position's row.
    const tokOff = o.token_embedding;
    const posOff = o.position_embedding;
    const inputs = /** @type {Int32Array} */ (this.inputs); // forward() set them
    for (let n = 0; n < N; n++) {
      const te = tokOff + inputs[n] * D;
      const pe = posOff + (n % T) * D;
      const r = n * D;
      for (let d = 0; d < D; d++) {
        const g = dx[r + d];
        G[te + d] += g;
        G[pe + d] += g;
      }
    }
  }

  // forward() then backward(); returns the loss.
  /** @param {Int32Array} inputs @param {Int32Array} targets @param {number} batch
   * @returns {number} */
  lossAndGradient(inputs, targets, batch) {
    const loss = this.forward(inputs, targets, batch);
    this.backward();
    return loss;
  }
}
