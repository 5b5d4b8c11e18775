/* A figure drawn by a code cell opens at full size when clicked (loaded through html_js_files in _config.yml):
   on a phone every figure is shrunk to the screen. Sphinx already links the numbered figures, whose images have a
   set size, to their files; this links any other. */
document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll(".cell_output img").forEach((image) => {
    if (image.closest("a")) {
      return;
    }
    const link = document.createElement("a");
    link.href = image.src;
    link.className = "figure-full-size";
    link.title = "Open the figure at full size";
    image.replaceWith(link);
    link.appendChild(image);
  });
});
