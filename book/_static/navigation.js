/* The chapter-list and page-contents buttons, working at every width (loaded through html_js_files in _config.yml).

pydata-sphinx-theme 0.17 listens only to the first `.primary-toggle` and `.secondary-toggle` on a page: its own
navbar buttons, which sphinx-book-theme hides. The buttons a reader sees are the book theme's, in the article
header, and clicking them did nothing (pydata-sphinx-theme issue 2451). Here each visible button passes its click to
the one the theme listens to, which opens the sidebar as a dialog; on a wide screen, where the chapter list is a
column beside the page, the button folds that column away and back instead. */
(() => {
  const WIDE = window.matchMedia("(min-width: 960px)");  // pydata-sphinx-theme's `lg` breakpoint

  const wire = (selector, foldable) => {
    const [listened, ...others] = document.querySelectorAll(selector);
    others.forEach((button) => button.addEventListener("click", (event) => {
      event.preventDefault();
      event.stopPropagation();
      if (foldable && WIDE.matches) {
        const folded = document.body.classList.toggle("course-primary-folded");
        button.setAttribute("aria-expanded", String(!folded));
      } else {
        listened.click();
      }
    }));
  };

  // A tap on a link in an open chapter list or page contents closes it, so the page shows where the link led
  // (the theme leaves the dialog open over it; closing it puts the list back in its column).
  const closeOnLink = (id) => {
    const dialog = document.getElementById(id);
    if (dialog) {
      dialog.addEventListener("click", (event) => {
        if (event.target.closest("a[href]") && dialog.open) {
          dialog.close();
        }
      });
    }
  };

  const setUp = () => {
    wire(".primary-toggle", true);
    wire(".secondary-toggle", false);
    closeOnLink("pst-primary-sidebar-modal");
    closeOnLink("pst-secondary-sidebar-modal");
  };
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setUp);
  } else {
    setUp();
  }
})();
