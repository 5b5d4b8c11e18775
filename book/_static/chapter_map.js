/* The chapter map's chapters are links (loaded through html_js_files in _config.yml).

Links inside an SVG work only when the SVG is part of the page, not an <img>. The map is an <img> (so it shows
without JavaScript, with its alt text); here it is replaced by the same drawing, inline, once fetched. */
document.addEventListener("DOMContentLoaded", () => {
  const image = document.querySelector("img[src$='chapter_map.svg']");
  if (!image) {
    return;
  }
  fetch(image.src)
    .then((response) => response.text())
    .then((text) => {
      const drawing = new DOMParser().parseFromString(text, "image/svg+xml").documentElement;
      if (drawing.nodeName !== "svg") {
        return;  // a fetch that returned something else: keep the picture
      }
      drawing.classList.add("chapter-map");
      drawing.removeAttribute("width");
      drawing.removeAttribute("height");
      const frame = document.createElement("div");
      frame.className = "chapter-map-frame";
      frame.appendChild(document.importNode(drawing, true));
      (image.closest("a") || image).replaceWith(frame);  // the figure's own link to the file would wrap the links
      // On a narrow screen the map keeps a readable size and scrolls inside its frame: say so under it.
      const cue = document.createElement("p");
      cue.className = "chapter-map-cue";
      cue.textContent = "The map is wider than the screen: swipe it sideways to see all of it.";
      frame.after(cue);
      const showCue = () => { cue.hidden = frame.scrollWidth <= frame.clientWidth; };
      showCue();
      window.addEventListener("resize", showCue);
    });
});
