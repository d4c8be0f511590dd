// Runs the browser's layer norm (src/normdive/web/static/layernorm.js) on what
// tests/test_js_parity.py sends on stdin, and writes the results on stdout, both as JSON.
//
// Floats travel as 16 hex digits of their IEEE 754 bit pattern, so NaN, the infinities and
// -0 cross over exactly (plain JSON has none of them) and any difference is visible to the bit.
// A row's steps are exact, so they travel as decimals' text and come back as the page's text.
//
// stdin:  {"steps": [{"row": [decimal], "eps": decimal}], "format": [hex],
//          "formatRows": [[hex]], "inputRows": [[hex]], "parse": [text],
//          "ownRows": [{"text": text, "eps": decimal}],
//          "localParse": [{"text": text, "decimalComma": boolean, "words": {english: text}}]}
// stdout: {"steps": [shown], "format": [text], "formatRows": [text], "inputRows": [text],
//          "parse": [{"values": [decimal]} | {"message": text}],
//          "ownRows": [{"values": [decimal], "shown": shown} | {"message": text}],
//          "localParse": [{"values": [decimal]} | {"message": text}]}
// where shown = {"mean": text, "variance": text, "denominator": text, "normalised": text,
//                "varianceHidden": boolean}: what "Try your own row" writes.

import { readFile } from "node:fs/promises";

// layernorm.js is an ES module written for the browser, but the repository's package.json has no
// "type": "module", so Node would read a plain import of the .js file as CommonJS (Node 18) or
// warn and re-parse it (Node 20). Importing its text as a data: URL makes it a module on every
// Node version; it imports nothing itself, so nothing needs resolving relative to it.
const source = await readFile(
  new URL("../../src/normdive/web/static/layernorm.js", import.meta.url),
  "utf8",
);
const {
  formatInputRow, formatNumber, formatRow, layerNormSteps, parseRow, varianceTooSmallToShow,
} = await import(
  `data:text/javascript;base64,${Buffer.from(source, "utf8").toString("base64")}`
);

const view = new DataView(new ArrayBuffer(8));

function fromHex(hex) {
  view.setBigUint64(0, BigInt(`0x${hex}`));
  return view.getFloat64(0);
}

function toHex(x) {
  view.setFloat64(0, x);
  return view.getBigUint64(0).toString(16).padStart(16, "0");
}

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

const request = JSON.parse(await readStdin());

function shown(row, eps) {
  const result = layerNormSteps(row, eps);
  return {
    mean: formatNumber(result.mean),
    variance: formatNumber(result.variance),
    denominator: formatNumber(result.denominator),
    normalised: formatRow(result.normalised),
    varianceHidden: varianceTooSmallToShow(result),
  };
}

const steps = request.steps.map(({ row, eps }) => shown(row, eps));

const parse = request.parse.map((text) => {
  const result = parseRow(text);
  return Array.isArray(result) ? { values: result } : { message: result.message };
});

// A row typed in a locale: its decimal symbol and the messages in its words.
const localParse = request.localParse.map(({ text, decimalComma, words }) => {
  const result = parseRow(text, { decimalComma, words });
  return Array.isArray(result) ? { values: result } : { message: result.message };
});

// What the page does with a typed row: parse it, then show its steps.
const ownRows = request.ownRows.map(({ text, eps }) => {
  const result = parseRow(text);
  return Array.isArray(result)
    ? { values: result, shown: shown(result, eps) }
    : { message: result.message };
});

process.stdout.write(
  JSON.stringify({
    steps,
    format: request.format.map((hex) => formatNumber(fromHex(hex))),
    formatRows: request.formatRows.map((row) => formatRow(row.map(fromHex))),
    inputRows: request.inputRows.map((row) => formatInputRow(row.map(fromHex))),
    parse,
    ownRows,
    localParse,
  }),
);
