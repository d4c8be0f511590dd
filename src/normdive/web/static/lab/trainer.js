// The lab's training loop (docs/lab.md, "The data", "One update", "Evaluation"): the twin of
// normdive.training.lab. Batches come from stream BATCHES of the run's seed, the held-out set
// from stream HELDOUT of the config's heldout_seed; the update is PyTorch's: clip_grad_norm_,
// then torch.optim.AdamW at the rate of training/train.py:learning_rate.

import { BETA1, BETA2 } from "./kernels.js";
import { LabModel } from "./model.js";
import { BATCHES, HELDOUT, Lab32 } from "./random.js";

/** A whole LabConfig (docs/lab.md): the model's fields and the training's.
 * @typedef {import("./model.js").ModelConfig & { steps: number, batch_size: number,
 *   learning_rate: number, warmup_steps: number, min_lr_ratio: number, weight_decay: number,
 *   grad_clip?: number | null, eval_every: number, heldout_size: number,
 *   heldout_seed: number }} LabConfig */
/** @typedef {{ heldout_loss: number, heldout_accuracy: number }} Evaluation */

// clip_grad_norm_ divides by (norm + this), so a zero gradient never divides by zero.
const CLIP_EPS = 1e-6;

// Rate for update `step` (1-based): linear warm-up, then cosine decay to min_lr_ratio x peak
// at the last update.
/** @param {number} step @param {LabConfig} config @returns {number} */
export function learningRate(step, config) {
  const peak = config.learning_rate;
  if (step <= config.warmup_steps) return (peak * step) / config.warmup_steps;
  const span = Math.max(1, config.steps - config.warmup_steps);
  const progress = Math.min(1, (step - config.warmup_steps) / span);
  const floor = config.min_lr_ratio * peak;
  return floor + (peak - floor) * 0.5 * (1 + Math.cos(Math.PI * progress));
}

// `count` copy sequences from `random`, written into inputs (count, 2L) and targets
// (count, L): for each, L symbols below(vocab_size); the input is the symbols, the separator
// (vocab_size), then the symbols again without the last.
/** @param {Lab32} random @param {number} count @param {number} copyLength
 * @param {number} vocabSize @param {Int32Array} inputs @param {Int32Array} targets */
export function drawSequences(random, count, copyLength, vocabSize, inputs, targets) {
  const T = 2 * copyLength;
  for (let b = 0; b < count; b++) {
    const row = b * T;
    for (let j = 0; j < copyLength; j++) {
      const symbol = random.below(vocabSize);
      targets[b * copyLength + j] = symbol;
      inputs[row + j] = symbol;
      if (j < copyLength - 1) inputs[row + copyLength + 1 + j] = symbol;
    }
    inputs[row + copyLength] = vocabSize;
  }
}

// A trainer of `config` from `seed`, its model on kernel path `path` (kernels.js: "wasm" or
// "js"; default the best this engine runs).
/** @param {LabConfig} config @param {number} seed
 * @param {import("./kernels.js").KernelPath} [path] */
export function createTrainer(config, seed, path) {
  const B = config.batch_size;
  const L = config.copy_length;
  const T = 2 * L;
  const V = config.vocab_size;
  const model = new LabModel(config, B, path);
  model.initialise(seed);

  const batches = new Lab32(seed, BATCHES);
  const inputs = new Int32Array(B * T);
  const targets = new Int32Array(B * L);

  const heldoutSize = config.heldout_size;
  const heldoutInputs = new Int32Array(heldoutSize * T);
  const heldoutTargets = new Int32Array(heldoutSize * L);
  drawSequences(new Lab32(config.heldout_seed, HELDOUT), heldoutSize, L, V, heldoutInputs,
    heldoutTargets);

  // AdamW's moments (in the model's heap), and the weight decay of each run of tensors:
  // matrices and embeddings only. Neighbouring tensors with the same decay are one run.
  const size = model.size;
  const m = model.moments.subarray(0, size);
  const v = model.moments.subarray(size, 2 * size);
  /** @type {{ start: number, end: number, decay: number }[]} */
  const groups = [];
  for (const s of model.shapes) {
    const decay = s.shape.length >= 2 ? config.weight_decay : 0;
    const last = groups[groups.length - 1];
    if (last !== undefined && last.decay === decay) last.end = s.offset + s.size;
    else groups.push({ start: s.offset, end: s.offset + s.size, decay });
  }
  const params = model.params;
  const grads = model.grads;
  const kernels = model.kernels;
  let stepsDone = 0;

  function clipGradients() {
    if (config.grad_clip === null || config.grad_clip === undefined) return;
    const squares = kernels.sumSquares(grads, size);
    const coefficient = config.grad_clip / (Math.sqrt(squares) + CLIP_EPS);
    // As torch: scaled unless the coefficient is at least 1, so a NaN norm spreads NaN.
    if (!(coefficient >= 1)) kernels.scale(grads, size, coefficient);
  }

  /** @param {number} step */
  function adamw(step) {
    const lr = learningRate(step, config);
    const stepSize = lr / (1 - BETA1 ** step);
    const correction2 = Math.sqrt(1 - BETA2 ** step);
    for (const group of groups) {
      kernels.adamw(params, grads, m, v, group.start, group.end, 1 - lr * group.decay, stepSize,
        correction2);
    }
  }

  return {
    config,
    seed,
    model,
    path: model.path,
    parameters: model.parameters,
    get stepsDone() {
      return stepsDone;
    },
    // One update; returns its training loss (before the update).
    step() {
      drawSequences(batches, B, L, V, inputs, targets);
      const loss = model.lossAndGradient(inputs, targets, B);
      clipGradients();
      stepsDone += 1;
      adamw(stepsDone);
      return loss;
    },
    // Held-out loss and per-token accuracy over the copied half, in chunks of batch_size.
    /** @returns {Evaluation} */
    evaluate() {
      let lossSum = 0;
      let correct = 0;
      for (let start = 0; start < heldoutSize; start += B) {
        const count = Math.min(B, heldoutSize - start);
        const loss = model.forward(
          heldoutInputs.subarray(start * T, (start + count) * T),
          heldoutTargets.subarray(start * L, (start + count) * L),
          count,
        );
        lossSum += loss * count;
        correct += model.correct;
      }
      return { heldout_loss: lossSum / heldoutSize, heldout_accuracy: correct / (heldoutSize * L) };
    },
  };
}
