// Runs the browser's layer norm (src/normdive/web/static/layernorm.js) on what
// tests/test_js_parity.py sends on stdin, and writes the results on stdout, both as JSON.
//
// Floats travel as 16 hex digits of their IEEE 754 bit pattern, so NaN, the infinities and
// -0 cross over exactly (plain JSON has none of them) and any difference is visible to the bit.
//
// stdin:  {"steps": [{"row": [hex], "eps": hex}], "format": [hex], "formatRows": [[hex]],
//          "inputRows": [[hex]], "parse": [text]}
// stdout: {"steps": [{"mean": hex, "variance": hex, "denominator": hex, "normalised": [hex]}],
//          "format": [text], "formatRows": [text], "inputRows": [text],
//          "parse": [{"values": [hex]} | {"message": text}]}

import { readFile } from "node:fs/promises";

// layernorm.js is an ES module written for the browser, but the repository's package.json has no
// "type": "module", so Node would read a plain import of the .js file as CommonJS (Node 18) or
// warn and re-parse it (Node 20). Importing its text as a data: URL makes it a module on every
// Node version; it imports nothing itself, so nothing needs resolving relative to it.
const source = await readFile(
  new URL("../../src/normdive/web/static/layernorm.js", import.meta.url),
  "utf8",
);
const { formatInputRow, formatNumber, formatRow, layerNormSteps, parseRow } = await import(
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

const steps = request.steps.map(({ row, eps }) => {
  const result = layerNormSteps(row.map(fromHex), fromHex(eps));
  return {
    mean: toHex(result.mean),
    variance: toHex(result.variance),
    denominator: toHex(result.denominator),
    normalised: result.normalised.map(toHex),
  };
});

const parse = request.parse.map((text) => {
  const result = parseRow(text);
  return Array.isArray(result) ? { values: result.map(toHex) } : { message: result.message };
});

process.stdout.write(
  JSON.stringify({
    steps,
    format: request.format.map((hex) => formatNumber(fromHex(hex))),
    formatRows: request.formatRows.map((row) => formatRow(row.map(fromHex))),
    inputRows: request.inputRows.map((row) => formatInputRow(row.map(fromHex))),
    parse,
  }),
);
