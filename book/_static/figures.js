/* A figure drawn by a code cell opens at full size when clicked (loaded through html_js_files in _config.yml):
   multi-panel figures are shrunk to fit the column, and more so on a phone. */
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
