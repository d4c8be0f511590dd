// The page's URL carries the switch, the learner's own row and the row in the player, so that a
// reload or a shared link shows the same page.
//
// history.replaceState is a synchronous round trip to the browser process, several
// milliseconds on a phone (bench/RESULTS.md, "A fast page on a slow phone"): the URL follows
// once the page has painted what changed, and the changes of one frame make one call.

/** @type {Map<string, string | null>} query parameter -> its value, null to remove it */
const urlChanges = new Map();

/** @param {string} name @param {string | null} value null: the parameter goes */
export function rememberInUrl(name, value) {
  if (urlChanges.size === 0) window.requestAnimationFrame(() => window.setTimeout(writeUrl, 0));
  urlChanges.set(name, value);
}

function writeUrl() {
  const url = new URL(window.location.href);
  for (const [name, value] of urlChanges) {
    if (value === null) url.searchParams.delete(name);
    else url.searchParams.set(name, value);
  }
  urlChanges.clear();
  window.history.replaceState(window.history.state, "", url);
}
