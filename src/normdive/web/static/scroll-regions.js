// A table wider than its column scrolls sideways inside a region (.table-scroll). The server
// makes every such region focusable (tabindex="0"), so that a keyboard can scroll it even
// without JavaScript. Here a region whose table fits leaves the Tab order, and comes back into
// it once the table no longer fits: the window narrowed, or the region was shown or swapped in.

const REGION = ".table-scroll";

/** @param {Element} region */
function fit(region) {
  if (region.scrollWidth > region.clientWidth) region.setAttribute("tabindex", "0");
  // A hidden region measures 0 wide: it keeps the server's tabindex until it is shown.
  else if (region.clientWidth > 0) region.removeAttribute("tabindex");
}

const resized = new ResizeObserver((entries) => {
  for (const entry of entries) fit(entry.target);
});

/** @param {Node} node @returns {Element[]} */
function regionsIn(node) {
  if (!(node instanceof Element)) return [];
  return [...(node.matches(REGION) ? [node] : []), ...node.querySelectorAll(REGION)];
}

let watching = false;

// Fit every region now and whenever its size changes, including regions swapped in later.
export function fitScrollRegions() {
  if (watching) return;
  watching = true;
  for (const region of regionsIn(document.body)) resized.observe(region);
  new MutationObserver((records) => {
    for (const record of records) {
      for (const node of record.removedNodes) for (const region of regionsIn(node)) resized.unobserve(region);
      for (const node of record.addedNodes) for (const region of regionsIn(node)) resized.observe(region);
    }
  }).observe(document.body, { childList: true, subtree: true });
}
