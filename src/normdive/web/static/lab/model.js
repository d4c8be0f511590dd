// The lab's model (docs/lab.md, "The model"): the block of training/model.py in double
// precision, forward and backward written out by hand. The heavy loops (matrix products,
// attention, layer norm, GELU and their backward passes) are kernels.js's, in WebAssembly SIMD
// or plain JavaScript (docs/lab.md, "The two paths"); this file orders them and keeps the
// small parts (embeddings, the loss). At this size (d_model 32, a few blocks) a library's
// kernels would not pay for their bytes.
//
// Shapes: B sequences, T = 2L positions, N = B x T rows, D d_model, H heads, E = D / H,
// R = mlp_ratio x D, V1 = vocab_size + 1 (the separator is vocab_size), M = B x L copied rows.
// Every buffer is allocated once per model for at most `maxBatch` sequences, in the model's
// heap (kernels.js: the WebAssembly instance's memory, or one Float64Array); an update
// allocates no arrays. Matrices are row-major; a Linear weight is (out, in), as PyTorch
// stores it.

import { createHeap, heapSize } from "./kernels.js";
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
/** @typedef {import("./kernels.js").Kernels} Kernels */
/** @typedef {import("./kernels.js").KernelPath} KernelPath */


const GPT2_STD = 0.02; // GPT-2's initialiser range, as training/model.py


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


// ---- the model's uses of the kernels ----------------------------------------------------------

// dst[dstOff .. dstOff + n) = src[srcOff .. srcOff + n), a memory copy.
/** @param {Float64Array} src @param {number} srcOff @param {Float64Array} dst
 * @param {number} dstOff @param {number} n */
function copy(src, srcOff, dst, dstOff, n) {
  dst.set(src.subarray(srcOff, srcOff + n), dstOff);
}

// Y (rows, O) = X (rows, I) W^T + bias, W (O, I): a torch.nn.Linear.
/** @param {Kernels} k @param {Float64Array} X @param {number} rows @param {number} I
 * @param {Float64Array} W @param {number} wOff @param {Float64Array} bias @param {number} bOff
 * @param {number} O @param {Float64Array} Y */
function linear(k, X, rows, I, W, wOff, bias, bOff, O, Y) {
  k.gemmNT(X, 0, rows, I, W, wOff, O, Y, 0, bias, bOff, false);
}

// The backward of `linear` for dY (rows, O): dX (rows, I) = dY W (overwritten; skipped when
// dX is null), dW += dY^T X (dY read transposed in place), dbias += column sums of dY.
/** @param {Kernels} k @param {Float64Array} dY @param {number} rows @param {number} O
 * @param {Float64Array} X @param {number} I @param {Float64Array} W @param {number} wOff
 * @param {Float64Array | null} dX @param {Float64Array} dW @param {Float64Array} dbias
 * @param {number} bOff */
function linearBackward(k, dY, rows, O, X, I, W, wOff, dX, dW, dbias, bOff) {
  k.columnSums(dY, rows, O, dbias, bOff);
  if (dX !== null) k.gemmNN(dY, O, 1, rows, O, W, wOff, I, dX, 0, false);
  k.gemmNN(dY, 1, O, O, rows, X, 0, I, dW, wOff, true);
}

// ---- the model -----------------------------------------------------------------------------

export class LabModel {
  // config: the LabConfig's snake_case fields (docs/lab.md); maxBatch: the most sequences one
  // forward pass takes; path: the kernels' ("wasm" or "js"; default the best this engine runs).
  /** @param {ModelConfig} config @param {number} maxBatch @param {KernelPath} [path] */
  constructor(config, maxBatch, path) {
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

    const N = maxBatch * T;
    const M = maxBatch * L;
    const layernorm = this.layernorm;
    // Every buffer of the model, from `take`: run once to count the heap's size, once to fill
    // it. Per block, what the backward pass reads: the block's input, the normed inputs of
    // both sublayers (and their xhat, 1/std), qkv, the attention weights, the heads' output,
    // the stream between the sublayers, the MLP's pre- and post-GELU activations.
    const buffers = (/** @type {(n: number) => Float64Array} */ take) => {
      const norm = (/** @type {number} */ n) => (layernorm ? take(n) : null);
      return {
        params: take(size),
        grads: take(size),
        // AdamW's first and second moments (trainer.js), beside the parameters they update.
        moments: take(2 * size),
        xs: Array.from({ length: this.depth + 1 }, () => take(N * D)),
        /** @type {BlockBuffers[]} */
        blocks: Array.from({ length: this.depth }, () => ({
          xhat1: norm(N * D),
          rstd1: norm(N),
          a1: norm(N * D),
          qkv: take(N * 3 * D),
          att: take(maxBatch * H * T * T),
          y: take(N * D),
          mid: take(N * D),
          xhat2: norm(N * D),
          rstd2: norm(N),
          a2: norm(N * D),
          u: take(N * R),
          g: take(N * R),
          slope: take(N * R), // d gelu(u) / du
        })),
        rows: take(M * D), // the copied rows of the last block's output
        fxhat: norm(M * D),
        frstd: norm(M),
        fout: norm(M * D),
        logits: take(M * V1),
        dlogits: take(M * V1),
        // Backward scratch, shared by the blocks (the pass visits one at a time).
        dx: take(N * D),
        dmid: take(N * D),
        da: take(N * D),
        dy: take(N * D),
        dqkv: take(N * 3 * D),
        du: take(N * R),
        drows: take(M * D),
        dfout: take(M * D),
        dp: take(T),
      };
    };
    /** @type {number[]} */
    const lengths = [];
    const none = new Float64Array(0);
    buffers((n) => {
      lengths.push(n);
      return none;
    });
    const heap = createHeap(heapSize(lengths), path);
    /** The path the kernels run on. @type {KernelPath} */
    this.path = heap.path;
    this.kernels = heap.kernels;
    const b = buffers(heap.take);
    this.params = b.params;
    this.grads = b.grads;
    this.moments = b.moments;
    /** @type {Record<string, Float64Array>} */
    this.parameters = {};
    /** @type {Record<string, Float64Array>} */
    this.gradients = {};
    for (const s of this.shapes) {
      this.parameters[s.name] = this.params.subarray(s.offset, s.offset + s.size);
      this.gradients[s.name] = this.grads.subarray(s.offset, s.offset + s.size);
    }
    this.xs = b.xs;
    this.blocks = b.blocks;
    this.rows = b.rows;
    this.fxhat = b.fxhat;
    this.frstd = b.frstd;
    this.fout = b.fout ?? b.rows; // without layer norm the head reads the rows themselves
    this.logits = b.logits;
    this.dlogits = b.dlogits;
    /** @type {Int32Array | null} */
    this.inputs = null; // the last forward()'s inputs, (batch, T)
    this.batch = 0;
    this.dx = b.dx;
    this.dmid = b.dmid;
    this.da = b.da;
    this.dy = b.dy;
    this.dqkv = b.dqkv;
    this.du = b.du;
    this.drows = b.drows;
    this.dfout = b.dfout;
    this.dp = b.dp;
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
    const { D, T, L, R, V1, H, E } = this;
    const N = batch * T;
    const P = this.params;
    const o = this.offsets;
    const kernels = this.kernels;
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
        kernels.layerNorm(x, N, D, this.eps, P, ob["norm_attn.weight"], ob["norm_attn.bias"],
          /** @type {Float64Array} */ (k.xhat1), /** @type {Float64Array} */ (k.rstd1),
          /** @type {Float64Array} */ (k.a1));
        a1 = /** @type {Float64Array} */ (k.a1);
      }
      linear(kernels, a1, N, D, P, ob["attn.qkv.weight"], P, ob["attn.qkv.bias"], 3 * D, k.qkv);
      kernels.attention(k.qkv, k.att, k.y, batch, T, H, E, scale);
      // mid = x + y W_out^T + b (residual) or y W_out^T + b.
      linear(kernels, k.y, N, D, P, ob["attn.out.weight"], P, ob["attn.out.bias"], D, k.mid);
      if (this.residual) kernels.addTo(k.mid, x, N * D);
      let a2 = k.mid;
      if (this.layernorm) {
        kernels.layerNorm(k.mid, N, D, this.eps, P, ob["norm_mlp.weight"], ob["norm_mlp.bias"],
          /** @type {Float64Array} */ (k.xhat2), /** @type {Float64Array} */ (k.rstd2),
          /** @type {Float64Array} */ (k.a2));
        a2 = /** @type {Float64Array} */ (k.a2);
      }
      linear(kernels, a2, N, D, P, ob["mlp.up.weight"], P, ob["mlp.up.bias"], R, k.u);
      kernels.gelu(k.u, N * R, k.g, k.slope);
      linear(kernels, k.g, N, R, P, ob["mlp.down.weight"], P, ob["mlp.down.bias"], D, out);
      if (this.residual) kernels.addTo(out, k.mid, N * D);
    }

    // The copied rows (positions L..2L-1 of each sequence), the final norm, the head.
    const M = batch * L;
    const last = this.xs[this.depth];
    for (let b = 0; b < batch; b++) {
      copy(last, (b * T + L) * D, this.rows, b * L * D, L * D);
    }
    if (this.layernorm) {
      kernels.layerNorm(this.rows, M, D, this.eps, P, o["final_norm.weight"],
        o["final_norm.bias"],
        /** @type {Float64Array} */ (this.fxhat), /** @type {Float64Array} */ (this.frstd),
        this.fout);
    }
    linear(kernels, this.fout, M, D, P, o["head.weight"], P, o["head.bias"], V1, this.logits);

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

  // A sublayer's input gradient in the stream (`into`, N rows): this.da (the gradient of the
  // sublayer's input to its norm) back through the norm `norm` (or straight through, without
  // layer norm), plus the skip path's `skip` (with residual connections on).
  /** @param {Record<string, number>} ob @param {string} norm
   * @param {Float64Array | null} xhat @param {Float64Array | null} rstd
   * @param {number} N @param {Float64Array} into @param {Float64Array} skip */
  _intoStream(ob, norm, xhat, rstd, N, into, skip) {
    const { D } = this;
    if (this.layernorm) {
      this.kernels.layerNormBackward(this.da, N, D, this.params, ob[`${norm}.weight`],
        /** @type {Float64Array} */ (xhat), /** @type {Float64Array} */ (rstd), into, this.grads,
        ob[`${norm}.weight`], ob[`${norm}.bias`]);
    } else {
      copy(this.da, 0, into, 0, N * D);
    }
    if (this.residual) this.kernels.addTo(into, skip, N * D);
  }

  // The gradient of the last forward()'s loss with respect to every parameter, into `grads`.
  backward() {
    const { D, T, L, R, V1, H, E } = this;
    const batch = this.batch;
    const kernels = this.kernels;
    const N = batch * T;
    const M = batch * L;
    const P = this.params;
    const G = this.grads;
    const o = this.offsets;
    G.fill(0);

    // Head and final norm, on the copied rows; then scattered into the stream's gradient.
    linearBackward(kernels, this.dlogits, M, V1, this.fout, D, P, o["head.weight"], this.dfout,
      G, G, o["head.bias"]);
    let drows = this.dfout;
    if (this.layernorm) {
      kernels.layerNormBackward(this.dfout, M, D, P, o["final_norm.weight"],
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
      linearBackward(kernels, dx, N, D, k.g, R, P, ob["mlp.down.weight"], this.du, G, G,
        ob["mlp.down.bias"]);
      const du = this.du;
      const slope = k.slope;
      kernels.mulBy(du, slope, N * R);
      const a2 = this.layernorm ? /** @type {Float64Array} */ (k.a2) : k.mid;
      const dmid = this.dmid;
      linearBackward(kernels, du, N, R, a2, D, P, ob["mlp.up.weight"], this.da, G, G,
        ob["mlp.up.bias"]);
      this._intoStream(ob, "norm_mlp", k.xhat2, k.rstd2, N, dmid, dx);

      // Attention: mid = [x +] out(attn(qkv(a1))).
      linearBackward(kernels, dmid, N, D, k.y, D, P, ob["attn.out.weight"], this.dy, G, G,
        ob["attn.out.bias"]);
      kernels.attentionBackward(k.qkv, k.att, this.dy, this.dqkv, this.dp, batch, T, H, E,
        scale);
      const a1 = this.layernorm ? /** @type {Float64Array} */ (k.a1) : x;
      linearBackward(kernels, this.dqkv, N, 3 * D, a1, D, P, ob["attn.qkv.weight"], this.da, G,
        G, ob["attn.qkv.bias"]);
      this._intoStream(ob, "norm_attn", k.xhat1, k.rstd1, N, dx, dmid);
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