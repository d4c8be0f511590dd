// Layer norm step by step, in the browser: the twin of normdive/numeric/{layernorm,display,rows}.py.
//
// Plain ES module, no framework, no build step. Every arithmetic step is one IEEE 754 binary64
// operation in the same order as the Python code (left-to-right sums, mean = sum / n,
// variance = sum of d * d / n, sqrt(variance + eps), (x - mean) / denominator), so the numbers are
// bit-identical to the server's; tests/test_js_parity.py checks that on thousands of rows.

export const DECIMALS = 6;
export const NOT_A_NUMBER = "not a number";
export const INFINITY = "infinity";
export const MINUS_INFINITY = "minus infinity";
export const MAX_ROW_LENGTH = 16;
export const MAX_ROW_CHARS = 400;
// The sizes an entry may have (0 aside): beyond them a square overflows or rounds to zero
// (rows.py's module docstring).
export const MAX_MAGNITUDE = 1e100;
export const MIN_MAGNITUDE = 1e-100;
const MAX_QUOTED_CHARS = 20;
const ZERO = "0.000000";
const SCALE = 10n ** BigInt(DECIMALS);

// ---- layer norm ------------------------------------------------------------------------------

/**
 * Normalise one row step by step.
 * @param {ArrayLike<number>} row  (n,) with n >= 1
 * @param {number} eps  finite, >= 0 (1e-5 with the switch on, 0 with it off)
 * @returns {{row: number[], eps: number, mean: number, variance: number,
 *            denominator: number, normalised: number[]}}
 */
export function layerNormSteps(row, eps) {
  const values = Array.from(row, Number); // (n,)
  const n = values.length;
  if (n === 0) throw new RangeError("layer norm needs at least one number in the row");
  eps = Number(eps);
  if (!(Number.isFinite(eps) && eps >= 0)) {
    throw new RangeError(`eps must be a finite number >= 0, got ${eps}`);
  }
  let total = 0;
  for (const x of values) total += x; // left to right, no compensation
  const mean = total / n;
  let squares = 0;
  for (const x of values) {
    const deviation = x - mean;
    squares += deviation * deviation; // not ** 2: the same single multiplication as Python
  }
  const variance = squares / n;
  const denominator = Math.sqrt(variance + eps);
  const normalised = values.map((x) => (x - mean) / denominator); // (n,)  0 / 0 is NaN
  return { row: values, eps, mean, variance, denominator, normalised };
}

// ---- display ---------------------------------------------------------------------------------

function nonFinite(x) {
  if (Number.isNaN(x)) return NOT_A_NUMBER;
  return x > 0 ? INFINITY : MINUS_INFINITY;
}

/**
 * Six decimals fixed, rounded from the exact binary value with ties to even, like Python's
 * format(x, ".6f"). Number.prototype.toFixed breaks ties away from zero and switches to
 * exponent notation from 1e21, so the digits are computed here with BigInt instead.
 */
export function formatNumber(x) {
  if (!Number.isFinite(x)) return nonFinite(x);
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  const bits = view.getBigUint64(0);
  const negative = bits >> 63n === 1n;
  const biasedExponent = Number((bits >> 52n) & 0x7ffn);
  let mantissa = bits & ((1n << 52n) - 1n);
  let exponent = -1074; // subnormal: value = mantissa * 2 ** -1074
  if (biasedExponent !== 0) {
    mantissa |= 1n << 52n;
    exponent = biasedExponent - 1075;
  }
  // |x| * 10 ** 6 = mantissa * 10 ** 6 * 2 ** exponent, rounded to an integer, ties to even.
  const scaled = mantissa * SCALE;
  let units;
  if (exponent >= 0) {
    units = scaled << BigInt(exponent);
  } else {
    const shift = BigInt(-exponent);
    units = scaled >> shift;
    const remainder = scaled - (units << shift);
    const half = 1n << (shift - 1n);
    if (remainder > half || (remainder === half && (units & 1n) === 1n)) units += 1n;
  }
  if (units === 0n) return ZERO; // also -0 and tiny negatives: a zero has no sign on the page
  const digits = units.toString().padStart(DECIMALS + 1, "0");
  const whole = digits.slice(0, -DECIMALS);
  return `${negative ? "-" : ""}${whole}.${digits.slice(-DECIMALS)}`;
}

/** "[-1.224736, 0.000000, 1.224736]" */
export function formatRow(xs) {
  return `[${Array.from(xs, formatNumber).join(", ")}]`;
}

/** A typed number as the learner meant it: 3, 2.5, 0.001, 1e-7 (String(x), -0 as 0). */
export function formatInputNumber(x) {
  if (!Number.isFinite(x)) return nonFinite(x);
  return String(x); // String(-0) is "0"
}

/** "[1, 2, 3]" */
export function formatInputRow(xs) {
  return `[${Array.from(xs, formatInputNumber).join(", ")}]`;
}

// ---- "Try your own row" ----------------------------------------------------------------------

// Explicit character sets: \s and \d mean different things in Python and JavaScript.
const SPACES = " \\t\\n\\r\\u00a0\\u202f";
const EDGE_SPACES = new RegExp(`^[${SPACES}]+|[${SPACES}]+$`, "g");
const SEPARATOR = new RegExp(`[${SPACES},]+`);
const EMPTY_BETWEEN_COMMAS = new RegExp(`,[${SPACES}]*,`);
const SPACES_ONLY = new RegExp(`[${SPACES}]+`);
const DECIMAL_COMMA_GROUP = /^[+\-\u2212]?[0-9]*[0-9],[0-9]+$/;
const NUMBER = /^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$/;
const NON_FINITE_WORDS = new Set(["nan", "inf", "infinity"]);

// The first group written like "0,5" when the row's groups are parted by spaces and every group
// with a comma in it is such a number: decimal commas, not a list. Same rule as
// normdive/numeric/rows.py (_decimal_comma).
function decimalComma(body) {
  const groups = body.split(SPACES_ONLY).filter((group) => group !== "");
  const withCommas = groups.filter((group) => group.includes(","));
  if (groups.length < 2 || withCommas.length === 0) return null;
  return withCommas.every((group) => DECIMAL_COMMA_GROUP.test(group)) ? withCommas[0] : null;
}

function codePointLength(text) {
  let count = 0;
  for (const _ of text) count += 1; // iterates code points, as Python's len() counts
  return count;
}

function quote(token) {
  const points = Array.from(token);
  const shown = points.length > MAX_QUOTED_CHARS
    ? `${points.slice(0, MAX_QUOTED_CHARS).join("")}…`
    : token;
  return `“${shown}”`;
}

/**
 * Parse "1, 2, 3", "[1 2 3]", "−0.5,2e3": an array of 1 to 16 finite numbers, or {message}.
 * Same rules and messages as normdive/numeric/rows.py.
 */
export function parseRow(text) {
  text = String(text);
  const length = codePointLength(text);
  if (length > MAX_ROW_CHARS) {
    return {
      message: `That is too long: a row can be at most ${MAX_ROW_CHARS} characters ` +
        `(this one has ${length}).`,
    };
  }
  let body = text.replace(EDGE_SPACES, "");
  const opens = body.startsWith("[");
  const closes = body.endsWith("]");
  if (opens !== closes || (opens && body.length === 1)) {
    return { message: "Put square brackets on both ends of the row, or leave both out." };
  }
  if (opens) body = body.slice(1, -1);
  const comma = decimalComma(body);
  if (comma !== null) {
    return {
      message: `${quote(comma)} looks like a decimal comma: write decimals with a point, as in ` +
        "0.5, and part the entries with commas or spaces.",
    };
  }
  body = body.replaceAll("\u2212", "-");
  if (EMPTY_BETWEEN_COMMAS.test(body)) {
    return { message: "There are two commas with no number between them." };
  }
  const tokens = body.split(SEPARATOR).filter((token) => token !== "");
  if (tokens.length === 0) {
    return { message: "Type at least one number, for example 1, 2, 3." };
  }
  const values = [];
  for (const token of tokens) {
    if (NON_FINITE_WORDS.has(token.replace(/^[+-]+/, "").toLowerCase())) {
      return { message: `${quote(token)} is not allowed: every entry must be a finite number.` };
    }
    if (!NUMBER.test(token)) {
      return {
        message: `${quote(token)} is not a number. Write numbers like 2, -1.5 or 1e-3, ` +
          "separated by commas or spaces.",
      };
    }
    const value = Number(token); // beyond the float range (1e400): infinite, and too large below
    if (Math.abs(value) > MAX_MAGNITUDE) {
      return {
        message: `${quote(token)} is too large: keep every entry between -1e100 and 1e100, so ` +
          "that its square still fits in a floating-point number.",
      };
    }
    if (value !== 0 && Math.abs(value) < MIN_MAGNITUDE) {
      return {
        message: `${quote(token)} is too small: an entry other than 0 must be at least 1e-100 ` +
          "in size, so that its square does not round to 0.",
      };
    }
    values.push(value);
  }
  if (values.length > MAX_ROW_LENGTH) {
    return {
      message: `A row can hold at most ${MAX_ROW_LENGTH} numbers; this one has ${values.length}.`,
    };
  }
  return values;
}
