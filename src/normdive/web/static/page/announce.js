// The page's polite live region (#announcer): what a control did, said as well as shown.

const FRESH_TEXT_DELAY_MS = 50;

/** `english`, one of the sentences the page's scripts say, in the page's language: the server
 * writes them, translated, on <html data-words> (web.views.rendering.PAGE_SCRIPT_WORDS).
 * @param {string} english @returns {string} */
export function pageWord(english) {
  return pageWords()[english] ?? english;
}

/** Every sentence of <html data-words>, English to the page's language.
 * @returns {Record<string, string>} */
export function pageWords() {
  const words = document.documentElement.dataset.words;
  return words ? JSON.parse(words) : {};
}

// Said when a post, or the script that sends it, did not reach the server.
export const NETWORK_PROBLEM = pageWord("The server could not be reached, so nothing was saved. Try again.");

/** Says `text` in the live region; nothing when there is no text or no region.
 * @param {string | null | undefined} text */
export function announce(text) {
  const region = document.getElementById("announcer");
  if (!region || !text) return;
  region.textContent = "";
  // A fresh text node a moment later is announced even when it repeats the last message.
  window.setTimeout(() => {
    region.textContent = text;
  }, FRESH_TEXT_DELAY_MS);
}
