// What the scripts loaded after the page (the depth sweep's panel, the lab's and the re-run's
// panels) fetch at most once each, and only when first asked: a panel's own stylesheet; and
// the paragraph a panel says a note in.

/** The stylesheet `href` (a page of its own may link it already): resolves once it has
 * loaded, or failed (the panel reads without it).
 * @param {string} href */
export function loadStylesheet(href) {
  const name = href.slice(href.lastIndexOf("/"));
  const links = /** @type {NodeListOf<HTMLLinkElement>} */ (document.querySelectorAll('link[rel="stylesheet"]'));
  if ([...links].some((link) => link.href.endsWith(name))) return Promise.resolve();
  const link = document.createElement("link");
  link.rel = "stylesheet";
  link.href = href;
  const loaded = new Promise((resolve) => {
    link.addEventListener("load", resolve, { once: true });
    link.addEventListener("error", resolve, { once: true });
  });
  document.head.append(link);
  return loaded;
}

/** A paragraph of `text` (a note, an alert, a placeholder while a panel loads).
 * @param {string} className @param {string} text */
export function paragraph(className, text) {
  const element = document.createElement("p");
  element.className = className;
  element.textContent = text;
  return element;
}
