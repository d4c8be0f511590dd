// The panel "Does it hold at other depths?": nothing here loads with the lesson page. page.js
// imports this module when the panel first opens; it then fetches the panel's figures (HTML
// drawn by the server's templates, the same as the page without JavaScript gets) and swaps
// them in, with their stylesheet (sweep.css). Picking a cell fetches the figures again with
// that cell in the player, whose curves grow as a played row's do. On the page of its own
// (/depths) the same module handles picks the same way.

import { loadStylesheet, paragraph } from "./loaders.js";
import { pageWord } from "./page/announce.js";
import { growCurves } from "./page/growing.js";
import { withPageLocale } from "./page/language.js";
import { fitScrollRegions } from "./scroll-regions.js";

const PROBLEM = pageWord("The runs at other depths could not be loaded just now. Try again.");
const STYLESHEET = new URL("./sweep.css", import.meta.url).href;

// Swap in the figures at `url` once they and `ready` (the stylesheet) have arrived, unless
// `current()` says a later load has taken over meanwhile.
/** @param {HTMLElement} body @param {string} url @param {Promise<unknown>} [ready]
 * @param {() => boolean} [current] */
async function load(body, url, ready = Promise.resolve(), current = () => true) {
  body.setAttribute("aria-busy", "true");
  try {
    const fetched = fetch(url, { headers: withPageLocale({ Accept: "text/html" }), credentials: "same-origin" });
    const [response] = await Promise.all([fetched, ready]);
    const html = await response.text();
    // Every answer, a refusal included, is a readable fragment drawn by the server.
    if (current()) body.innerHTML = html;
  } catch {
    if (current()) body.replaceChildren(paragraph("note", PROBLEM));
  } finally {
    if (current()) body.removeAttribute("aria-busy");
  }
}

// Say what now plays in a polite live region (the lesson page's, or the page of its own's):
// the cell's heading and where it ended, in the words the server drew.
/** @param {HTMLElement | null} player */
function announcePlayed(player) {
  const region = document.getElementById("announcer");
  if (!region || !player) return;
  const heading = player.querySelector("#sweep-player-title")?.textContent.trim() ?? "";
  const figures = player.querySelector(".final-figures");
  const ended = figures
    ? `${figures.querySelector("h1, h2, h3, h4, h5, h6")?.textContent.trim() ?? ""}: ${[...figures.querySelectorAll("dt")]
        .map((term) => `${term.textContent.trim()} ${term.nextElementSibling?.textContent.trim() ?? ""}`)
        .join("; ")}.`
    : "";
  region.textContent = "";
  // A fresh text node a moment later is announced even when it repeats the last message.
  window.setTimeout(() => {
    region.textContent = `${heading}. ${ended}`.trim();
  }, 50);
}

// The panel has opened: load its figures, once.
/** @param {HTMLElement} panel */
export async function openPanel(panel) {
  const body = /** @type {HTMLElement | null} */ (panel.querySelector("#sweep-body"));
  if (!body || body.dataset.loaded) return;
  body.dataset.loaded = "true";
  body.replaceChildren(paragraph("placeholder", body.dataset.loading || ""));
  // The server draws #sweep-body with data-src, the figures' address.
  await load(body, /** @type {string} */ (body.dataset.src), loadStylesheet(STYLESHEET));
}

// The latest pick: an earlier one still loading neither draws nor takes the focus.
let latestPick = 0;

/** @param {HTMLAnchorElement} link has data-sweep-cell @param {HTMLElement} body has data-src */
async function pick(link, body) {
  const mine = ++latestPick;
  const url = new URL(/** @type {string} */ (body.dataset.src), window.location.href);
  url.searchParams.set("cell", /** @type {string} */ (link.dataset.sweepCell));
  // The link is swapped away with the figures: the focus waits in the panel meanwhile.
  body.focus({ preventScroll: true });
  const current = () => mine === latestPick;
  await load(body, url.href, undefined, current);
  if (!current()) return;
  // On the page of its own the address names the cell now in the player, so a reload or a
  // shared link plays it again; inside the lesson the address stays the lesson's.
  const target = new URL(link.href, window.location.href);
  const player = /** @type {HTMLElement | null} */ (body.querySelector("#sweep-player"));
  const playing = player?.querySelector(".charts");
  if (playing && target.pathname === window.location.pathname) {
    window.history.replaceState(null, "", target);
  }
  // Focus moves to the player, which the server drew whole, so a screen reader reads it whole;
  // its curves grow meanwhile.
  player?.focus();
  announcePlayed(player);
  if (player) growCurves(player);
}

document.addEventListener("click", (event) => {
  const link = event.target instanceof Element
    ? /** @type {HTMLAnchorElement | null} */ (event.target.closest("a[data-sweep-cell]"))
    : null;
  if (!link || event.defaultPrevented || event.button !== 0) return;
  if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return; // a new tab
  const body = /** @type {HTMLElement | null} */ (link.closest("#sweep-body"));
  if (!body || !body.dataset.src) return;
  event.preventDefault();
  pick(link, body);
});

fitScrollRegions();
