// The player: playing a row posts like any form (forms.js), and the server's answer draws the
// row's curves, which grow over a few seconds (at once under prefers-reduced-motion); the row's
// final figures show when the curves are complete. A reload shows the same row again, whole.

import { rememberInUrl } from "./address.js";
import { announce } from "./announce.js";
import { growCurves } from "./growing.js";

function reducedMotion() {
  return window.matchMedia("(prefers-reduced-motion: reduce)").matches;
}

/** The played row's final figures as one sentence ("Final figures. Accuracy: ...; ...").
 * @param {HTMLElement} player */
function finalFiguresText(player) {
  const figures = player.querySelector(".final-figures");
  if (!figures) return "";
  const parts = [...figures.querySelectorAll("dt")].map((term) => `${term.textContent}: ${term.nextElementSibling?.textContent ?? ""}`);
  const heading = figures.querySelector("h6")?.textContent ?? "";
  return `${heading}. ${parts.join("; ")}.`;
}

/** Whether the gate (the lesson's check) has closed. */
export function gateClosed() {
  return Boolean(document.getElementById("gate")?.classList.contains("closed"));
}

// The row in #player is `key`: the address and the forms carry it. `animate`: a row just played
// grows its curves and keeps its results hidden until they are complete, then says them.
// `closing`: the gate's verdict, said again after the row's figures when this play closed it.
/** @param {string} key the row's key @param {boolean} animate @param {string} closing */
export async function showPlayedRow(key, animate, closing = "") {
  const player = document.getElementById("player");
  if (!player || !player.dataset.playerRow) return;
  rememberInUrl("play", key);
  for (const field of /** @type {NodeListOf<HTMLInputElement>} */ (document.querySelectorAll("[data-play-field]"))) {
    field.value = key;
  }
  if (!animate) return;
  const shown = /** @type {NodeListOf<HTMLElement>} */ (document.querySelectorAll(`[data-result-for="${key}"]`));
  const held = reducedMotion() ? [] : [...shown];
  for (const element of held) element.hidden = true;
  // A row just played grows in the player, which on a phone is below the button pressed: bring
  // its top on screen so that the growing curves are seen. Focus goes with it, or the next Tab
  // would jump back to the button, now off screen; where the player was already in view, focus
  // stays on the button, ready for the next row.
  if (player.getBoundingClientRect().top > window.innerHeight / 3) {
    player.focus({ preventScroll: true });
    player.scrollIntoView({ block: "start", behavior: reducedMotion() ? "auto" : "smooth" });
  }
  const whole = await growCurves(player);
  for (const element of held) element.hidden = false;
  if (whole) announce([finalFiguresText(player), closing].filter(Boolean).join(" "));
}
