// The chart both training panels show (lab-panel.js, rerun.js): the server draws it whole, the
// recorded cells and any curve already kept (templates/charts.html); a run's curve on this
// device grows here as the worker reports its held-out accuracy.

/** A device curve of the chart in `frame`, named `key` (its data-series): `clear` empties it,
 * `add` draws it on to a step's held-out accuracy (a figure that is not finite breaks it).
 * @param {HTMLElement} frame @param {string} key */
export function growingCurve(frame, key) {
  const svg = /** @type {SVGSVGElement} */ (frame.querySelector("svg[data-plot]"));
  // The plot's box in the viewBox and the step at its right edge (web.views.charts.CurveChart).
  const [left, top, right, bottom, steps] = (svg.dataset.plot ?? "").split(" ").map(Number);
  const group = /** @type {SVGGElement} */ (svg.querySelector(`[data-series="${key}"]`));
  const line = /** @type {SVGPathElement} */ (group.querySelector(".line"));
  const marker = group.querySelector(".marker");
  let penDown = Boolean(line.getAttribute("d"));
  return {
    clear() {
      line.setAttribute("d", "");
      marker?.setAttribute("visibility", "hidden");
      penDown = false;
    },
    /** @param {number} step @param {number} accuracy a fraction */
    add(step, accuracy) {
      if (!Number.isFinite(accuracy)) {
        penDown = false;
        return;
      }
      const x = (left + ((right - left) * step) / steps).toFixed(2);
      const y = (bottom - (bottom - top) * Math.min(Math.max(accuracy, 0), 1)).toFixed(2);
      line.setAttribute("d", `${line.getAttribute("d") ?? ""}${penDown ? "L" : "M"}${x} ${y}`);
      penDown = true;
      marker?.setAttribute("transform", `translate(${x} ${y})`);
      marker?.removeAttribute("visibility");
    },
  };
}
