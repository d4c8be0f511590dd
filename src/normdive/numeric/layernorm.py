"""Layer norm as the steps a learner does by hand, in float64.

CONTRACT (implemented by the numeric helper; the web app and the JS twin rely on it):

    @dataclass(frozen=True)
    class LayerNormSteps:
        row: tuple[float, ...]          # (n,)
        eps: float
        mean: float                     # sum(row) / n, summed left to right
        variance: float                 # population: sum((x - mean)**2) / n, left to right
        denominator: float              # math.sqrt(variance + eps)
        normalised: tuple[float, ...]   # (n,)  (x - mean) / denominator; NaN when 0/0

    def layer_norm_steps(row: Sequence[float], eps: float) -> LayerNormSteps

The exact order of operations is fixed so that static/layernorm.js gives bit-identical results.
"""
