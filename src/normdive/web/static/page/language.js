// The page's own language, sent with every request its scripts make: the server draws an answer
// in the language of the page that asked (web.infrastructure.language), not in one another tab
// has chosen since.

const PAGE_LOCALE_HEADER = "X-Page-Locale";

/** `headers` and the page's language.
 * @param {Record<string, string>} [headers] @returns {Record<string, string>} */
export function withPageLocale(headers = {}) {
  return { ...headers, [PAGE_LOCALE_HEADER]: document.documentElement.lang || "en" };
}
