// A played row's curves grow from the first step to the last over a few seconds: a CSS
// animation of the server's SVG (page.css, .growing), none under prefers-reduced-motion.

/** Grow the curves of the charts in `player`. Resolves true once they are whole (at once where
 * motion is reduced), false when the player was drawn again before.
 * @param {HTMLElement} player @returns {Promise<boolean>} */
export async function growCurves(player) {
  const charts = player.querySelector(".charts");
  if (!charts) return false;
  charts.classList.remove("growing");
  void charts.getBoundingClientRect(); // a row played again in the same player grows again
  charts.classList.add("growing");
  try {
    await Promise.all(charts.getAnimations({ subtree: true }).map((animation) => animation.finished));
    return player.isConnected;
  } catch {
    return false; // cancelled: the player was swapped away
  }
}
