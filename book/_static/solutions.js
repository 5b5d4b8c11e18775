/* A solution's title opens the solution (loaded through html_js_files in _config.yml).

sphinx-exercise writes each title as "Solution to" and a link to its exercise. sphinx-togglebutton opens the
solution on a click on the title's background or its chevron, but a click on the link's words, most of the
title, followed the link and scrolled away. Here such a click presses the chevron instead. */
document.addEventListener("click", (event) => {
  const link = event.target.closest(".solution.dropdown > .admonition-title a.reference");
  const chevron = link && link.parentElement.querySelector(".toggle-button");
  if (chevron) {
    event.preventDefault();
    chevron.click();
  }
});
