// Layer norm step by step, in the browser: the twin of normdive/numeric/{layernorm,display,rows}.py.
//
// Plain ES module, no framework, no build step. A row is decimals and fractions, so its steps
// are rationals,
// computed here exactly with BigInt (numeric/layernorm.py computes the same rationals with
// Fraction): the mean, the variance, and each square root kept as its square (the denominator
// as variance + eps, each output as d * d / (variance + eps) with d's sign). Nothing is rounded
// until formatNumber writes six decimals, once, from the exact value, so both twins show the
// same text digit for digit; tests/test_js_parity.py checks that on thousands of rows.

export const DECIMALS = 6;
export const NOT_A_NUMBER = "not a number";
export const INFINITY = "infinity";
export const MINUS_INFINITY = "minus infinity";
export const MAX_ROW_LENGTH = 16;
export const MAX_ROW_CHARS = 400;
// The sizes an entry may have (0 aside), decided on the typed decimal (rows.py's docstring).
export const MAX_MAGNITUDE = 1e100;
export const MIN_MAGNITUDE = 1e-100;
const MAX_MAGNITUDE_EXPONENT = 100;
const MIN_MAGNITUDE_EXPONENT = -100;
// An exponent longer than this (leading zeros aside) is out of range for any row's mantissa.
const MAX_EXPONENT_DIGITS = 6;
const NORMAL_FORM = "NFKC";
const MAX_QUOTED_CHARS = 20;
const ZERO = "0.000000";
const SCALE = 10n ** BigInt(DECIMALS);

/** An exact rational num / den, den > 0. @typedef {{ num: bigint, den: bigint }} Rational */
/** An exact square root, sqrt(square) with the sign `negative` says.
 * @typedef {{ square: Rational, negative: boolean }} Root */
/** @typedef {{ mean: Rational, variance: Rational, denominator: Root,
 *   normalised: (Root | null)[] }} Steps */
/** What formatNumber writes: a float, a rational, a root, or null for 0 / 0.
 * @typedef {number | Rational | Root | null} Figure */

// ---- exact numbers ---------------------------------------------------------------------------

// A decimal as written: sign, digits before and after the point, exponent.
const DECIMAL = /^([+-]?)(?:([0-9]+)\.?([0-9]*)|\.([0-9]+))(?:[eE]([+-]?[0-9]+))?$/;
// A fraction in lowest terms as parseRow writes it (and numeric/display.py): "-3/8".
const FRACTION_TEXT = /^(-?[0-9]+)\/([0-9]+)$/;

/** @param {bigint} a @param {bigint} b @returns {bigint} */
function gcd(a, b) {
  let [x, y] = [a < 0n ? -a : a, b];
  while (y !== 0n) [x, y] = [y, x % y];
  return x;
}

// A decimal's text (or a number, read as String(x) writes it), or a fraction's "p/q", as the
// exact rational {num, den}, den > 0.
/** @param {string | number} x @returns {Rational} */
function rational(x) {
  const text = String(x); // a number: its shortest round-trip digits
  const fraction = FRACTION_TEXT.exec(text);
  if (fraction !== null) {
    const den = BigInt(fraction[2]);
    if (den === 0n) throw new RangeError(`not a number: ${text}`);
    return { num: BigInt(fraction[1]), den };
  }
  const match = DECIMAL.exec(text);
  if (match === null) throw new RangeError(`not a decimal number: ${text}`);
  const [, sign, whole = "", part = "", fractionDigits = "", exponent = "0"] = match;
  const after = part || fractionDigits;
  let num = BigInt(whole + after || "0");
  if (sign === "-") num = -num;
  if (num === 0n) return { num: 0n, den: 1n };
  const power = Number(exponent) - after.length;
  return power >= 0 ? { num: num * 10n ** BigInt(power), den: 1n } : { num, den: 10n ** BigInt(-power) };
}

// floor(sqrt(n)) for a BigInt n >= 0, by Newton's iteration from above.
/** @param {bigint} n @returns {bigint} */
function isqrt(n) {
  if (n < 2n) return n;
  let x = 1n << BigInt(n.toString(16).length * 2 + 1); // 2 ** (bits / 2 + 1) > sqrt(n)
  for (;;) {
    const next = (x + n / x) >> 1n;
    if (next >= x) return x;
    x = next;
  }
}

// ---- layer norm ------------------------------------------------------------------------------

/**
 * Normalise one row step by step, exactly.
 * @param {ArrayLike<string | number>} row  (n,) with n >= 1: decimals as text ("0.1", "1e-7")
 *   or fractions in lowest terms ("2/3"), as parseRow gives them
 * @param {string | number} eps  (the lesson's epsilon as text with the switch on, "0" off)
 * @returns {Steps} a normalised output is null where it is 0 / 0.
 */
export function layerNormSteps(row, eps) {
  const values = Array.from(row, rational); // (n,)
  const n = BigInt(values.length);
  if (n === 0n) throw new RangeError("layer norm needs at least one number in the row");
  const e = rational(eps);
  if (e.num < 0n) throw new RangeError(`eps must be a finite number >= 0, got ${eps}`);
  // A common denominator D, the least one (a power of ten for a row of decimals): x = X / D.
  const D = values.reduce((common, x) => (common / gcd(common, x.den)) * x.den, 1n);
  const X = values.map((x) => x.num * (D / x.den));
  const S = X.reduce((total, x) => total + x, 0n);
  // mean = S / (n D); deviation d = (n X - S) / (n D) = Y / (n D).
  const Y = X.map((x) => n * x - S);
  const Q = Y.reduce((total, y) => total + y * y, 0n);
  // variance = Q / (n^3 D^2); variance + eps = (Q F + E n^3 D^2) / (n^3 D^2 F), eps = E / F;
  // an output's square = d^2 / (variance + eps) = Y^2 n F / (Q F + E n^3 D^2).
  const cube = n * n * n * D * D;
  const top = Q * e.den + e.num * cube;
  const normalised = Y.map((y) => (top === 0n
    ? null // variance + eps is 0: every deviation is 0 and eps is 0, so each output is 0 / 0
    : { square: { num: y * y * n * e.den, den: top }, negative: y < 0n }));
  return {
    mean: { num: S, den: n * D },
    variance: { num: Q, den: cube },
    denominator: { square: { num: top, den: cube * e.den }, negative: false },
    normalised,
  };
}

// ---- display ---------------------------------------------------------------------------------

/** @param {number} x */
function nonFinite(x) {
  if (Number.isNaN(x)) return NOT_A_NUMBER;
  return x > 0 ? INFINITY : MINUS_INFINITY;
}

// |value| * 10 ** 6, rounded, as text: 1224736n -> "1.224736".
/** @param {bigint} units @param {boolean} negative */
function unitsText(units, negative) {
  if (units === 0n) return ZERO; // also -0 and tiny negatives: a zero has no sign on the page
  const digits = units.toString().padStart(DECIMALS + 1, "0");
  return `${negative ? "-" : ""}${digits.slice(0, -DECIMALS)}.${digits.slice(-DECIMALS)}`;
}

// round(|num / den| * 10 ** 6), ties to even (den > 0).
/** @param {Rational} value @returns {bigint} */
function rationalUnits({ num, den }) {
  const scaled = (num < 0n ? -num : num) * SCALE;
  let units = scaled / den;
  const twice = 2n * (scaled - units * den);
  if (twice > den || (twice === den && (units & 1n) === 1n)) units += 1n;
  return units;
}

// round(sqrt(num / den) * 10 ** 6), ties to even: with a / b = square * 10 ** 12 and
// k = floor(sqrt(a / b)), up when 4a > b (2k + 1) ** 2; equality is a tie (numeric/display.py).
/** @param {Rational} square @returns {bigint} */
function rootUnits({ num, den }) {
  const a = num * SCALE * SCALE;
  const k = isqrt(a / den);
  const beyond = 4n * a - den * (2n * k + 1n) ** 2n;
  return beyond > 0n || (beyond === 0n && (k & 1n) === 1n) ? k + 1n : k;
}

/**
 * Six decimals fixed, rounded once from the exact value with ties to even: a float (its exact
 * binary value, like Python's format(x, ".6f")), an exact rational {num, den}, an exact root
 * {square, negative}, or null for 0 / 0. Number.prototype.toFixed breaks ties away from zero
 * and switches to exponent notation from 1e21, so the digits are computed with BigInt.
 * @param {Figure} x @returns {string}
 */
export function formatNumber(x) {
  if (x === null) return NOT_A_NUMBER;
  if (typeof x === "object") {
    return "square" in x
      ? unitsText(rootUnits(x.square), x.negative)
      : unitsText(rationalUnits(x), x.num < 0n);
  }
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
  // |x| = mantissa * 2 ** exponent, exactly.
  return exponent >= 0
    ? unitsText(mantissa * SCALE << BigInt(exponent), negative)
    : unitsText(rationalUnits({ num: mantissa, den: 1n << BigInt(-exponent) }), negative);
}

/** The variance is above 0 but shows as 0.000000 (numeric/display.py, same name).
 * @param {Steps} steps @returns {boolean} */
export function varianceTooSmallToShow(steps) {
  return steps.variance.num !== 0n && formatNumber(steps.variance) === ZERO;
}

/** "[-1.224736, 0.000000, 1.224736]" @param {ArrayLike<Figure>} xs @returns {string} */
export function formatRow(xs) {
  return `[${Array.from(xs, formatNumber).join(", ")}]`;
}

/**
 * A typed number as the learner meant it: 3, 2.5, 0.001, 1e-7 (String(x), -0 as 0). A row from
 * parseRow is already this text, every digit typed kept, and comes back as it is.
 * @param {string | number} x @returns {string}
 */
export function formatInputNumber(x) {
  if (typeof x === "string") return x;
  if (!Number.isFinite(x)) return nonFinite(x);
  return String(x); // String(-0) is "0"
}

/** "[1, 2, 3]" @param {ArrayLike<string | number>} xs @returns {string} */
export function formatInputRow(xs) {
  return `[${Array.from(xs, formatInputNumber).join(", ")}]`;
}

// ---- "Try your own row" ----------------------------------------------------------------------

// Explicit character sets: \s and \d mean different things in Python and JavaScript.
const SPACES = " \\t\\n\\r\\u00a0\\u202f";
const EDGE_SPACES = new RegExp(`^[${SPACES}]+|[${SPACES}]+$`, "g");
const SEPARATOR = new RegExp(`[${SPACES},]+`);
const EMPTY_BETWEEN_COMMAS = new RegExp(`,[${SPACES}]*,`);
// Where decimals are written after a comma, the entries are separated by semicolons.
const SEMICOLON_SEPARATOR = new RegExp(`[${SPACES};]+`);
const EMPTY_BETWEEN_SEMICOLONS = new RegExp(`;[${SPACES}]*;`);
// The digits, decimal separator and comma of Arabic script, which NFKC leaves as they are
// (numeric/numbers.py, ARABIC_FORMS): ٠-٩ and ۰-۹ are 0-9, ٫ a point, ، a comma.
const ARABIC_FORMS = /[\u0660-\u0669\u06f0-\u06f9\u066b\u060c]/g;
const SPACES_ONLY = new RegExp(`[${SPACES}]+`);
// The spaces around a fraction's slash belong to the fraction ("2 / 3" is one entry).
const SPACED_SLASH = new RegExp(`[${SPACES}]*/[${SPACES}]*`, "g");
// The superscripts and subscripts NFKC turns into a digit, a sign or an exponent's "e"
// (numeric/numbers.py, RAISED_OR_LOWERED).
const RAISED_OR_LOWERED = /[\u00b2\u00b3\u00b9\u1d31\u1d49\u2070\u2074-\u207b\u2080-\u208b\u2091]/;
const DECIMAL_COMMA_GROUP = /^[+\-\u2212]?[0-9]*[0-9],[0-9]+$/;
const NON_FINITE_WORDS = new Set(["nan", "inf", "infinity", "\u221e"]);
// A typed answer's decimal (numeric/numbers.py, DECIMAL): a fraction's two sides are read by it.
const ANSWER_DECIMAL = /^([+-]?)([0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE]([+-]?[0-9]+))?$/;
// The characters a fraction entry may have; anything else is not a number (numeric/rows.py).
const FRACTION_ALPHABET = /^[0-9+\-.eE/]+$/;
const BOUND = 10n ** BigInt(MAX_MAGNITUDE_EXPONENT);
// A row's problems, as numeric/rows.py words them (its ROW_MESSAGES): each message is the
// English sentence, looked up in the words the page gives (<html data-words>, translated by the
// server) and filled in at its %(name)s / %(name)d placeholders.
const TOO_LONG = "That is too long: a row can be at most %(limit)d characters (this one has %(length)d).";
const RAISED = "“%(entry)s” is a raised or lowered character: write every entry on the line, " +
  "with powers of ten as in 1e-3.";
const BRACKETS = "Put square brackets on both ends of the row, or leave both out.";
const LOOKS_LIKE_DECIMAL_COMMA = "“%(entry)s” looks like a decimal comma: write decimals with " +
  "a point, as in 0.5, and part the entries with commas or spaces.";
const EMPTY_BETWEEN = "There are two commas with no number between them.";
const EMPTY_BETWEEN_SEMICOLONS_MESSAGE = "There are two semicolons with no number between them.";
const NO_NUMBER = "Type at least one number, for example 1, 2, 3.";
const NOT_FINITE = "“%(entry)s” is not allowed: every entry must be a finite number.";
const NOT_A_NUMBER_WORDS = "“%(entry)s” is not a number. Write numbers like 2, -1.5, 2/3 or " +
  "1e-3, separated by commas or spaces.";
const FRACTION_FORM_WORDS = "“%(entry)s” is not a fraction to work with: write one plain " +
  "number over another, like 2/3 or -1.5/4.";
const DIVIDES_BY_ZERO_WORDS = "“%(entry)s” divides by zero: the number under the / cannot be 0.";
const TOO_LARGE = "“%(entry)s” is too large: keep every entry between -1e100 and 1e100.";
const TOO_SMALL = "“%(entry)s” is too small: an entry other than 0 must be at least 1e-100 in size.";
const TOO_MANY = "A row can hold at most %(limit)d numbers; this one has %(count)d.";

/** @typedef {{ decimalComma?: boolean, words?: Record<string, string> }} RowOptions */

/** `message` in the words given (itself where they lack it), filled with `fields`.
 * @param {Record<string, string>} words @param {string} message
 * @param {Record<string, string | number>} [fields] @returns {{ message: string }} */
function said(words, message, fields = {}) {
  const text = (words[message] ?? message).replace(
    /%\((\w+)\)[sd]/g,
    (/** @type {string} */ whole, /** @type {string} */ name) => (name in fields ? String(fields[name]) : whole),
  );
  return { message: text };
}

// nan, inf, infinity or ∞ in any case, with one sign or none (numeric/numbers.py).
/** @param {string} token */
function isNonFinite(token) {
  const body = token.startsWith("+") || token.startsWith("-") ? token.slice(1) : token;
  return NON_FINITE_WORDS.has(body.toLowerCase());
}

// One side of a fraction: a plain decimal, no sign, no exponent, as {num, den}; or the words
// of what is wrong with it (numeric/numbers.py, parse_decimal with in_fraction).
/** @param {string} text @returns {Rational | string} */
function fractionSide(text) {
  const match = ANSWER_DECIMAL.exec(text);
  if (match === null) return NOT_A_NUMBER_WORDS;
  const [, sign, mantissa, exponent] = match;
  if (sign !== "" || exponent !== undefined) return FRACTION_FORM_WORDS;
  const [whole, decimals = ""] = mantissa.split(".");
  return { num: BigInt(whole + decimals || "0"), den: 10n ** BigInt(decimals.length) };
}

// A fraction entry ("2/3", "-1.5/4") as its text in lowest terms, or {message}
// (numeric/rows.py, _fraction_entry).
/** @param {string} token @param {string} typed the entry as written, for the messages
 * @param {Record<string, string>} words @returns {string | { message: string }} */
function fractionEntry(token, typed, words) {
  const refused = (/** @type {string} */ message) => said(words, message, { entry: quoted(typed) });
  if (!FRACTION_ALPHABET.test(token)) return refused(NOT_A_NUMBER_WORDS);
  const slash = token.indexOf("/");
  let top = token.slice(0, slash);
  const bottom = token.slice(slash + 1);
  const negative = top.startsWith("-");
  if (top.startsWith(negative ? "-" : "+")) top = top.slice(1);
  if (bottom.includes("/")) return refused(FRACTION_FORM_WORDS);
  const upper = fractionSide(top);
  if (typeof upper === "string") return refused(upper);
  const lower = fractionSide(bottom);
  if (typeof lower === "string") return refused(lower);
  if (lower.num === 0n) return refused(DIVIDES_BY_ZERO_WORDS);
  const size = upper.num * lower.den;
  const den = upper.den * lower.num;
  if (size > BOUND * den) return refused(TOO_LARGE);
  if (size !== 0n && size * BOUND < den) return refused(TOO_SMALL);
  const common = gcd(size, den);
  const num = (negative ? -size : size) / common;
  return den / common === 1n ? `${num}` : `${num}/${den / common}`;
}

// The first group written like "0,5" when the row's groups are parted by spaces and every group
// with a comma in it is such a number: decimal commas, not a list. Same rule as
// normdive/numeric/rows.py (_decimal_comma).
/** @param {string} body @returns {string | null} */
function decimalCommaGroup(body) {
  const groups = body.split(SPACES_ONLY).filter((group) => group !== "");
  const withCommas = groups.filter((group) => group.includes(","));
  if (groups.length < 2 || withCommas.length === 0) return null;
  return withCommas.every((group) => DECIMAL_COMMA_GROUP.test(group)) ? withCommas[0] : null;
}

/** @param {string} text */
function codePointLength(text) {
  let count = 0;
  for (const _ of text) count += 1; // iterates code points, as Python's len() counts
  return count;
}

// An entry as a message quotes it: up to MAX_QUOTED_CHARS characters (numeric/rows.py, _about).
/** @param {string} token */
function quoted(token) {
  const points = Array.from(token);
  return points.length > MAX_QUOTED_CHARS ? `${points.slice(0, MAX_QUOTED_CHARS).join("")}…` : token;
}

// A matched number's significant digits and exponent (value = 0.digits x 10 ** exponent), or
// null for a zero; an exponent too long to be in range comes back as +-10 ** 6 (rows.py, _size).
/** @param {RegExpExecArray} match @returns {{ digits: string, exponent: number } | null} */
function size(match) {
  const [, , whole = "", part = "", fraction = "", written = "0"] = match;
  const after = part || fraction;
  const digits = (whole + after).replace(/^0+/, "");
  if (digits === "") return null;
  const magnitude = written.replace(/^[+-]/, "").replace(/^0+/, "");
  const exponent = magnitude.length > MAX_EXPONENT_DIGITS
    ? 10 ** MAX_EXPONENT_DIGITS * (written.startsWith("-") ? -1 : 1)
    : Number(written);
  const dropped = (whole + after).length - digits.length; // leading zeros
  return { digits: digits.replace(/0+$/, ""), exponent: exponent + whole.length - dropped };
}

// ECMAScript's Number::toString layout of 0.digits x 10 ** n (numeric/display.py).
/** @param {string} digits @param {number} n */
function layout(digits, n) {
  const k = digits.length;
  if (k <= n && n <= 21) return digits + "0".repeat(n - k);
  if (0 < n && n <= 21) return `${digits.slice(0, n)}.${digits.slice(n)}`;
  if (-6 < n && n <= 0) return `0.${"0".repeat(-n)}${digits}`;
  const mantissa = k === 1 ? digits : `${digits[0]}.${digits.slice(1)}`;
  return `${mantissa}e${n - 1 >= 0 ? "+" : "-"}${Math.abs(n - 1)}`;
}

/**
 * Parse "1, 2, 3", "[1 2 3]", "−0.5,2e3", "1/3 2/3" (with decimalComma: "1,5; 2; 2/3"): an
 * array of 1 to 16 numbers as text, a decimal with every digit typed kept, in the layout
 * String(x) uses ("0.1", "1e-7", "1e+100"), a fraction in lowest terms ("2/3"), or {message},
 * in `words` (the page's translations of the English messages). Same rules and messages as
 * normdive/numeric/rows.py, whose entries follow a typed answer's rules (numeric/numbers.py).
 * @param {string} text @param {RowOptions} [options] @returns {string[] | { message: string }}
 */
export function parseRow(text, options = {}) {
  const decimalComma = options.decimalComma ?? false;
  const words = options.words ?? {};
  text = String(text);
  const length = codePointLength(text);
  if (length > MAX_ROW_CHARS) return said(words, TOO_LONG, { limit: MAX_ROW_CHARS, length });
  const raised = RAISED_OR_LOWERED.exec(text);
  if (raised !== null) return said(words, RAISED, { entry: quoted(raised[0]) });
  let body = text.normalize(NORMAL_FORM).replace(ARABIC_FORMS, arabicForm).replace(EDGE_SPACES, "");
  const opens = body.startsWith("[");
  const closes = body.endsWith("]");
  if (opens !== closes || (opens && body.length === 1)) return said(words, BRACKETS);
  if (opens) body = body.slice(1, -1);
  const comma = decimalComma ? null : decimalCommaGroup(body);
  if (comma !== null) return said(words, LOOKS_LIKE_DECIMAL_COMMA, { entry: quoted(comma) });
  body = body.replaceAll("\u2212", "-");
  if ((decimalComma ? EMPTY_BETWEEN_SEMICOLONS : EMPTY_BETWEEN_COMMAS).test(body)) {
    return said(words, decimalComma ? EMPTY_BETWEEN_SEMICOLONS_MESSAGE : EMPTY_BETWEEN);
  }
  const tokens = body.replace(SPACED_SLASH, "/")
    .split(decimalComma ? SEMICOLON_SEPARATOR : SEPARATOR)
    .filter((token) => token !== "");
  if (tokens.length === 0) return said(words, NO_NUMBER);
  const values = [];
  for (const typed of tokens) {
    if (isNonFinite(typed)) return said(words, NOT_FINITE, { entry: quoted(typed) });
    // A decimal comma is a point, unless the entry has a point already (numeric/rows.py).
    const token = decimalComma && !typed.includes(".") ? typed.replaceAll(",", ".") : typed;
    if (token.includes("/")) {
      const entry = fractionEntry(token, typed, words);
      if (typeof entry !== "string") return entry;
      values.push(entry);
      continue;
    }
    const refused = (/** @type {string} */ message) => said(words, message, { entry: quoted(typed) });
    const match = DECIMAL.exec(token);
    if (match === null) return refused(NOT_A_NUMBER_WORDS);
    const found = size(match);
    if (found === null) {
      values.push("0"); // also -0, as String(-0) writes it
      continue;
    }
    const { digits, exponent } = found;
    const top = MAX_MAGNITUDE_EXPONENT + 1;
    if (exponent > top || (exponent === top && digits !== "1")) return refused(TOO_LARGE);
    if (exponent <= MIN_MAGNITUDE_EXPONENT) return refused(TOO_SMALL);
    values.push(`${match[1] === "-" ? "-" : ""}${layout(digits, exponent)}`);
  }
  if (values.length > MAX_ROW_LENGTH) {
    return said(words, TOO_MANY, { limit: MAX_ROW_LENGTH, count: values.length });
  }
  return values;
}

/** The ASCII character an Arabic-script digit, decimal separator or comma stands for.
 * @param {string} character @returns {string} */
function arabicForm(character) {
  const code = character.charCodeAt(0);
  if (code === 0x066b) return ".";
  if (code === 0x060c) return ",";
  return String(code >= 0x06f0 ? code - 0x06f0 : code - 0x0660);
}
