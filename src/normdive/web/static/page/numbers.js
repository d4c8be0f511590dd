// The live numbers: the epsilon switch repaints every computed number at once, in this browser
// (layernorm.js is the twin of the server's numeric code, so the numbers are the same ones the
// server shows). Every element that shows a row's steps carries the row as data-row (JSON) and
// its numbers in slots marked data-ln="mean" (variance, denominator, normalised, eps).
//
// The switch must repaint within a frame on a slow phone (bench/phone.py), so the work per
// flip is kept to writing what differs:
// - each row's texts are computed once per eps (rowTexts), and the other eps's are computed
//   while the page is idle after loading, before the learner can reach the switch;
// - the elements to write are found once (paintTargets) and again only after a region of the
//   page was replaced (forgetTargets);
// - a text is written only when it changes: most read the same with eps on and off (the mean
//   and the variance always do), and every write costs a layout of its line.

import { formatNumber, layerNormSteps, varianceTooSmallToShow } from "../layernorm.js";
import { rememberInUrl } from "./address.js";
import { announce } from "./announce.js";

/** @typedef {{ on: boolean, value: number, text: string }} Eps */
/** @typedef {{ mean: string, variance: string, denominator: string, normalised: string,
 *   eps: string, varianceHidden: boolean }} RowTexts */

const MAX_CACHED_TEXTS = 200; // rows typed by the learner come and go; the page's stay few
/** @type {Map<string, RowTexts>} "eps text|row JSON" -> the row's texts */
const textsByRow = new Map();
/** @type {{ eps: HTMLElement[], rows: { element: HTMLElement, slots: HTMLElement[] }[],
 *   sentences: HTMLElement[], fields: HTMLInputElement[] } | null} */
let targets = null;

// The lesson's epsilon, as the server writes it on <main data-eps> (content/d9.toml).
function lessonEps() {
  return /** @type {HTMLElement} */ (document.getElementById("main")).dataset.eps ?? "";
}

/** The epsilon the switch says now; without a switch, the lesson's.
 * @returns {Eps} */
export function epsState() {
  const control = /** @type {HTMLInputElement | null} */ (document.getElementById("eps-switch"));
  const on = control ? control.checked : true;
  const onText = lessonEps();
  return { on, value: on ? Number(onText) : 0, text: on ? onText : "0" };
}

// A number as layernorm.js writes it: digits, at most one point, an optional exponent.
const WRITTEN_NUMBER = /^[-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?$/;

/** How the page writes numbers, from <html>: its decimal symbol (data-decimal), its minus sign
 * (data-minus: CLDR's, a left-to-right mark before the hyphen-minus in Arabic), what separates
 * a row's numbers (data-list-separator) and the words for values that are not finite numbers
 * (data-value-words), as the server writes them (i18n.numbers).
 * @returns {{ decimal: string, minus: string, separator: string, words: Record<string, string> }} */
function pageWriting() {
  const data = document.documentElement.dataset;
  return {
    decimal: data.decimal ?? ".",
    minus: data.minus ?? "-",
    separator: data.listSeparator ?? ", ",
    words: data.valueWords ? JSON.parse(data.valueWords) : {},
  };
}

/** A number layernorm.js wrote (with a point) as the page writes it: "-1.224736" is
 * "-1,224736" on a German page, "\u200e-1.224736" on an Arabic one; a word for a value in the
 * page's language.
 * @param {string} text @returns {string} */
export function shownNumber(text) {
  const writing = pageWriting();
  if (!WRITTEN_NUMBER.test(text)) return writing.words[text] ?? text;
  const written = writing.decimal === "." ? text : text.replace(".", writing.decimal);
  return written.startsWith("-") ? writing.minus + written.slice(1) : written;
}

/** A row's numbers as the page writes them: "[1,5; -2]" on a German page.
 * @param {Iterable<import("../layernorm.js").Figure>} xs @returns {string} */
function shownRow(xs) {
  return `[${Array.from(xs, (x) => shownNumber(formatNumber(x))).join(pageWriting().separator)}]`;
}

/** @param {Eps} eps @returns {Eps} */
function otherEps(eps) {
  const onText = lessonEps();
  return eps.on ? { on: false, value: 0, text: "0" } : { on: true, value: Number(onText), text: onText };
}

/** A row's texts at an epsilon, computed once.
 * @param {string} rowData the row as JSON (data-row) @param {Eps} eps @returns {RowTexts} */
export function rowTexts(rowData, eps) {
  const key = `${eps.text}|${rowData}`;
  let texts = textsByRow.get(key);
  if (texts === undefined) {
    if (textsByRow.size >= MAX_CACHED_TEXTS) textsByRow.clear();
    const steps = layerNormSteps(JSON.parse(rowData), eps.text); // exact: the decimals' text
    texts = {
      mean: shownNumber(formatNumber(steps.mean)),
      variance: shownNumber(formatNumber(steps.variance)),
      denominator: shownNumber(formatNumber(steps.denominator)),
      normalised: shownRow(steps.normalised),
      eps: shownNumber(eps.text),
      varianceHidden: varianceTooSmallToShow(steps), // no slot: the note under the steps
    };
    textsByRow.set(key, texts);
  }
  return texts;
}

/** @param {Node} node @param {string} text */
function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

function paintTargets() {
  if (targets === null) {
    const rows = /** @type {HTMLElement[]} */ ([...document.querySelectorAll("[data-row]")]);
    targets = {
      eps: /** @type {HTMLElement[]} */ ([...document.querySelectorAll('[data-ln="eps"]')]),
      rows: rows
        .filter((element) => !element.closest("template"))
        .map((element) => ({ element, slots: /** @type {HTMLElement[]} */ ([...element.querySelectorAll("[data-ln]")]) })),
      sentences: /** @type {HTMLElement[]} */ ([...document.querySelectorAll("[data-eps-sentence]")]),
      fields: /** @type {HTMLInputElement[]} */ ([...document.querySelectorAll("[data-eps-field]")]),
    };
  }
  return targets;
}

/** The page's regions were replaced: the elements to paint are found again. */
export function forgetTargets() {
  targets = null;
}

/** Writes a row's texts at `eps` into its slots.
 * @param {HTMLElement} element carries data-row @param {Eps} eps
 * @param {Iterable<HTMLElement>} slots */
export function paintRow(element, eps, slots = element.querySelectorAll("[data-ln]")) {
  const texts = rowTexts(element.dataset.row ?? "", eps);
  for (const slot of slots) {
    const text = texts[/** @type {keyof RowTexts} */ (slot.dataset.ln)];
    if (typeof text === "string") setText(slot, text);
  }
}

/** Every number, sentence and hidden field that depends on the switch, as it says now. */
export function repaint() {
  const eps = epsState();
  const found = paintTargets();
  for (const slot of found.eps) setText(slot, shownNumber(eps.text));
  for (const { element, slots } of found.rows) paintRow(element, eps, slots);
  for (const sentence of found.sentences) {
    setText(sentence, (eps.on ? sentence.dataset.on : sentence.dataset.off) ?? "");
  }
  for (const field of found.fields) field.value = eps.on ? "on" : "off";
}

/** The texts of the epsilon the switch does not say, ready before the learner flips it. */
export function prepareOtherEps() {
  const other = otherEps(epsState());
  for (const { element } of paintTargets().rows) rowTexts(element.dataset.row ?? "", other);
}

/** The learner flipped the switch: every number follows, the URL too, and what the flip did to
 * the constant row is said as well as shown ("... not a number ..."). */
export function switchFlipped() {
  repaint(); // the learner's own row too: its steps carry data-row like the others
  rememberInUrl("eps", epsState().on ? null : "off");
  announce(document.getElementById("edge-now")?.textContent?.replace(/\s+/g, " ").trim());
}
