// Imports the lab's browser modules (src/normdive/web/static/lab/) in Node. They are ES modules
// that import one another by relative URL, but the repository's package.json has no
// "type": "module", so Node would read them as CommonJS (or warn and re-parse them). A resolve
// hook marks every file under the lab folder as a module; nothing else changes.

import { register } from "node:module";

const LAB = new URL("../../src/normdive/web/static/lab/", import.meta.url).href;
const HOOKS = `
export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context);
  return resolved.url.startsWith(${JSON.stringify(LAB)}) ? { ...resolved, format: "module" } : resolved;
}`;
register(`data:text/javascript,${encodeURIComponent(HOOKS)}`);

export async function importLab(name) {
  return import(new URL(name, LAB).href);
}

export async function readStdinJson() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}
