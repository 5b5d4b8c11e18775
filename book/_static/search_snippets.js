/* Search results quote the chapter's own text (loaded through html_js_files in _config.yml).

Sphinx's search quotes a result page's `[role="main"]` element, which in sphinx-book-theme also holds the article's
header buttons and the page-contents title, so a snippet read "....pdf Attention ... Contents". Here the quote comes
from the article alone; a page without one is quoted as Sphinx would. */
document.addEventListener("DOMContentLoaded", () => {
  if (typeof Search === "undefined") {
    return;  // not the search page
  }
  const quoteTheMain = Search.htmlToText;
  Search.htmlToText = (htmlString, anchor) => {
    const page = new DOMParser().parseFromString(htmlString, "text/html");
    const article = page.querySelector("article.bd-article");
    if (!article) {
      return quoteTheMain(htmlString, anchor);
    }
    article.querySelectorAll(".headerlink, script, style").forEach((node) => node.remove());
    const block = anchor ? article.querySelector(anchor) : null;
    return (block || article).textContent;
  };
});
