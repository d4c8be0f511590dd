// Runs the lab's JavaScript (src/normdive/web/static/lab/) on what tests/test_lab_parity.py
// sends on stdin and writes the answers on stdout, both as JSON.
//
// stdin:  {"path": "wasm" | "js" (the kernels every model here runs on),
//          "vectors": [{"seed", "stream", "count"}], "erf": [x],
//          "initial": [{"config", "seed"}], "gradients": [{"config", "seed", "per_tensor", "h"}],
//          "losses": [{"config", "seed", "steps"}]}
// stdout: {"vectors": [{"u32": [..], "uniform": [..], "normal": [..], "below": [..]}],
//          "erf": [erf(x)], "initial": [{name: [values]}],
//          "gradients": [[{"name", "index", "analytic", "numeric"}]], "losses": [[loss]],
//          "path": the path the models ran on, "paths": the paths this engine runs}
// A gradient check draws one batch from the run's stream BATCHES, takes the analytic gradient,
// and compares, in every tensor, `per_tensor` entries spread over it and the entry of largest
// analytic gradient with the five-point central difference
// (L(p - 2h) - 8 L(p - h) + 8 L(p + h) - L(p + 2h)) / 12h (error of order h^4).

import { importLab, readStdinJson } from "./lab_modules.mjs";

const request = await readStdinJson();
const { Lab32, BATCHES } = await importLab("random.js");
const { availablePaths, erf } = await importLab("kernels.js");
const { createTrainer, drawSequences } = await importLab("trainer.js");

const BELOW_N = [1, 2, 16, 17, 1000, 65536];

function vectors({ seed, stream, count }) {
  const draw = (f) => {
    const random = new Lab32(seed, stream);
    return Array.from({ length: count }, () => f(random));
  };
  return {
    u32: draw((r) => r.nextU32()),
    uniform: draw((r) => r.uniform()),
    normal: draw((r) => r.normal()),
    below: Object.fromEntries(BELOW_N.map((n) => [n, draw((r) => r.below(n))])),
  };
}

function initial({ config, seed }) {
  const { parameters } = createTrainer(config, seed, request.path);
  return Object.fromEntries(Object.entries(parameters).map(([k, v]) => [k, Array.from(v)]));
}

function gradients({ config, seed, per_tensor: perTensor, h }) {
  const trainer = createTrainer(config, seed, request.path);
  const model = trainer.model;
  const B = config.batch_size;
  const L = config.copy_length;
  const inputs = new Int32Array(B * 2 * L);
  const targets = new Int32Array(B * L);
  drawSequences(new Lab32(seed, BATCHES), B, L, config.vocab_size, inputs, targets);
  model.lossAndGradient(inputs, targets, B);
  const checks = [];
  const lossAt = (at, value) => {
    model.params[at] = value;
    return model.forward(inputs, targets, B);
  };
  for (const s of model.shapes) {
    const indices = new Set();
    for (let j = 0; j < perTensor; j++) indices.add(Math.floor(((j + 0.5) * s.size) / perTensor));
    let largest = 0;
    for (let i = 1; i < s.size; i++) {
      if (Math.abs(model.grads[s.offset + i]) > Math.abs(model.grads[s.offset + largest])) {
        largest = i;
      }
    }
    indices.add(largest);
    for (const index of indices) {
      const at = s.offset + index;
      const saved = model.params[at];
      const numeric =
        (lossAt(at, saved - 2 * h) - 8 * lossAt(at, saved - h) + 8 * lossAt(at, saved + h) -
          lossAt(at, saved + 2 * h)) /
        (12 * h);
      model.params[at] = saved;
      checks.push({ name: s.name, index, analytic: model.grads[at], numeric });
    }
  }
  return checks;
}

function losses({ config, seed, steps }) {
  const trainer = createTrainer(config, seed, request.path);
  return Array.from({ length: steps }, () => trainer.step());
}

const answer = {
  path: createTrainer(request.initial[0].config, 0, request.path).path,
  paths: availablePaths(),
  vectors: (request.vectors ?? []).map(vectors),
  erf: (request.erf ?? []).map(erf),
  initial: (request.initial ?? []).map(initial),
  gradients: (request.gradients ?? []).map(gradients),
  losses: (request.losses ?? []).map(losses),
};
process.stdout.write(JSON.stringify(answer));
