"""The built site as readers use it: every page opened in headless Chromium, served from localhost.

Chromium and its driver are Debian's (`apt-get install chromium chromium-driver`, which `make test` does as
root); nothing is downloaded. The site is `_build/html` unless MINFORMERS_SITE names another built site (a small
book built with `tools/build_book.py DIR` while developing: MINFORMERS_SITE=DIR/_build/html). Every page is visited
once (`visits`), and each test below reads what that visit recorded, so the suite takes about two seconds a page.
Screenshots for review, in light and dark mode, go to `screenshots/` beside the site (`_build/screenshots/`).
"""

import functools
import http.server
import json
import os
import shutil
import tempfile
import threading
import urllib.request
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
SITE = Path(os.environ.get("MINFORMERS_SITE", ROOT / "_build" / "html")).resolve()
SCREENSHOTS = SITE.parent / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--no-first-run", "--disable-dev-shm-usage", "--window-size=1280,1000",
]
SKIPPED_FOLDERS = {"_static", "_sources", "_images", "_sphinx_design_static"}

pytestmark = pytest.mark.book


def site_pages() -> list[str]:
    """Every HTML page of the site, as a path relative to its root; index.html only redirects to the first page."""
    pages = [path.relative_to(SITE).as_posix() for path in sorted(SITE.rglob("*.html"))
             if not SKIPPED_FOLDERS & set(path.relative_to(SITE).parts)]
    return [page for page in pages if page != "index.html"]


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@pytest.fixture(scope="module")
def base_url():
    """The site served on a free localhost port, for the whole module."""
    if not (SITE / "index.html").exists():
        pytest.fail(f"no built site at {SITE}: run `make book` first (or set MINFORMERS_SITE)")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(SITE)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not shutil.which(path)]
    if missing:
        pytest.fail(f"{' and '.join(missing)} not found: the browser tests need Debian's Chromium, installed with "
                    "`apt-get install -y chromium chromium-driver` (`make test` does this when run as root)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.TemporaryDirectory(prefix="minformers-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*CHROMIUM_FLAGS, f"--user-data-dir={profile.name}"]:
        options.add_argument(flag)
    # "browser": the console (errors, failed loads); "performance": every network request the page makes.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    yield driver
    driver.quit()
    profile.cleanup()


# Runs in the page once it has loaded: waits for MathJax's first typesetting and for every image, then reports.
PAGE_REPORT = """
const done = arguments[arguments.length - 1];
const mathjax = window.MathJax && window.MathJax.startup && window.MathJax.startup.promise;
const images = Array.from(document.images).filter(image => !image.complete)
  .map(image => new Promise(resolve => { image.onload = image.onerror = resolve; }));
Promise.all([mathjax || Promise.resolve(), ...images, document.fonts.ready]).then(() => {
  const article = document.querySelector("article.bd-article") || document.body;
  const text = article.cloneNode(true);
  text.querySelectorAll("pre, code, script, style, mjx-container, .highlight, textarea").forEach(n => n.remove());
  done({
    url: location.href,
    theme: document.documentElement.dataset.theme || "",
    images: Array.from(document.images).map(image => ({
      src: image.getAttribute("src"),
      loaded: image.complete && image.naturalWidth > 0,
      alt: image.getAttribute("alt"),
      caption: !!(image.closest("figure") && image.closest("figure").querySelector("figcaption")),
      drawn_by_a_cell: !!image.closest(".cell_output") && image.offsetParent !== null,  // hidden: a closed solution
    })),
    headings: Array.from(article.querySelectorAll("h1, h2, h3, h4, h5, h6"))
      .map(h => [Number(h.tagName[1]), h.textContent.replace(/[#¶]/g, "").trim()]),
    math: document.querySelectorAll(".math").length,
    typeset: document.querySelectorAll(".math mjx-container").length,
    math_errors: Array.from(document.querySelectorAll("mjx-merror")).map(e => e.getAttribute("data-mjx-error")),
    raw_tex: ["\\\\(", "\\\\[", "$$"].filter(mark => text.textContent.includes(mark)),
    code_cells: document.querySelectorAll(".cell .cell_input").length,
    copy_buttons: document.querySelectorAll(".cell .cell_input button.copybtn").length,
    links: Array.from(document.querySelectorAll("a[href]"))  // an SVG link's .href is not a string: resolve it here
      .map(a => new URL(a.getAttribute("href"), location.href).href),
    notebook: Array.from(document.querySelectorAll("a[href$='.ipynb']")).map(a => a.href),
    solutions: document.querySelectorAll(".solution.dropdown").length,
    wide_outputs: Array.from(document.querySelectorAll(".cell_output pre"))  // printed text wider than its box
      .filter(pre => pre.offsetParent !== null && pre.scrollWidth > pre.clientWidth + 1)
      .map(pre => pre.textContent.split("\\n").reduce((a, b) => (b.length > a.length ? b : a)).slice(0, 100)),
    printed_outputs: Array.from(document.querySelectorAll(".cell_output pre")).filter(pre => pre.offsetParent).length,
    repeated_ids: Object.entries(Array.from(document.querySelectorAll("[id]")).reduce(
      (seen, node) => ({...seen, [node.id]: (seen[node.id] || 0) + 1}), {})).filter(([, n]) => n > 1).map(([id]) => id),
  });
});
"""


@dataclass
class Visit:
    page: str
    report: dict
    console: list = field(default_factory=list)  # console messages at error level, failed loads included
    requests: list = field(default_factory=list)  # every URL the page asked for


def drain_logs(driver) -> tuple[list, list]:
    errors = [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    requests = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            requests.append(message["params"]["request"]["url"])
    return errors, requests


@pytest.fixture(scope="module")
def visits(browser, base_url) -> dict[str, Visit]:
    """Each page opened once in a fresh browser profile; what it logged and requested, and what it shows."""
    pages = site_pages()
    assert pages, f"no pages in {SITE}"
    drain_logs(browser)
    result = {}
    try:
        for page in pages:
            browser.get(base_url + page)
            report = browser.execute_async_script(PAGE_REPORT)
            report["shapes"] = figure_shapes(browser)
            console, requests = drain_logs(browser)
            result[page] = Visit(page, report, console, requests)
    finally:
        browser.set_window_size(1280, 1000)
    return result


SHAPES = """return Array.from(document.querySelectorAll("article img")).filter(image => image.offsetParent)
  .map(image => ({src: image.getAttribute("src"), file: image.naturalWidth / image.naturalHeight,
    shown: image.clientWidth / image.clientHeight, width: image.clientWidth}));"""


def figure_shapes(browser) -> dict[int, list]:
    """{window width: each shown figure's shape there} on the page loaded, its window resized to each of WIDTHS."""
    shapes = {}
    for width in WIDTHS.values():
        browser.set_window_size(width, 900)
        shapes[width] = browser.execute_script(SHAPES)
    browser.set_window_size(1280, 1000)
    return shapes


def failures(visits, check) -> list[str]:
    """`check(visit)` returns a list of problems; the result names the page of each."""
    return [f"{visit.page}: {problem}" for visit in visits.values() for problem in check(visit)]


def test_every_page_loads_without_console_errors(visits):
    assert not failures(visits, lambda visit: visit.console)


def test_the_site_loads_nothing_from_outside(visits):
    """Scripts, styles, fonts and MathJax all come from the site itself: the reader may be offline."""
    def outside(visit):
        return [url for url in visit.requests
                if urlsplit(url).scheme in ("http", "https", "ws", "wss") and urlsplit(url).hostname != "127.0.0.1"]
    assert not failures(visits, outside)


def test_no_page_loads_thebe(visits):
    """Thebe (live code cells) is off, so its script and styles would be weight on every page for nothing."""
    assert not failures(visits, lambda visit: [url for url in visit.requests if "thebe" in url.lower()])


def test_every_image_has_loaded(visits):
    assert not failures(visits, lambda visit: [image["src"] for image in visit.report["images"] if not image["loaded"]])


def test_math_is_typeset_with_no_raw_tex_left(visits):
    def problems(visit):
        report = visit.report
        found = []
        if report["typeset"] < report["math"]:
            found.append(f"{report['math'] - report['typeset']} of {report['math']} formulas not typeset by MathJax")
        found += [f"MathJax error: {error}" for error in report["math_errors"]]
        found += [f"raw TeX {mark!r} left in the text" for mark in report["raw_tex"]]
        return found
    assert not failures(visits, problems)
    assert sum(visit.report["typeset"] for visit in visits.values()) > 0, "no page has any math: nothing was checked"


def test_every_figure_has_alt_text_or_a_caption(visits):
    def unnamed(visit):
        found = []
        for image in visit.report["images"]:
            alt = (image["alt"] or "").strip()
            file_name = Path(urlsplit(image["src"]).path).name
            if "..." in alt:
                found.append(f"{image['src']}: alt text with a gap read aloud as 'dot dot dot': {alt!r}")
            elif not (image["caption"] or (alt and file_name not in alt)):
                found.append(f"{image['src']} has no alt text or caption (alt={image['alt']!r})")
        return found
    assert not failures(visits, unnamed)


FIGURES = """return Array.from(document.querySelectorAll(".cell_output img")).filter(image => image.offsetParent)
  .map(image => ({src: image.getAttribute("src"), pixels: image.naturalWidth, shown: image.clientWidth,
    number: ((image.closest("figure") || document.body).querySelector("figcaption .caption-number") || {})
      .textContent || ""}));"""


@pytest.mark.parametrize("window_width", ["desktop"], indirect=True)
def test_figures_are_numbered_and_shown_at_the_size_they_were_drawn(browser, base_url, visits, window_width):
    """At a desktop width a cell's figure is not shrunk, so its labels keep their size in points (tests/
    test_figures.py), and it has twice the pixels it is shown at, so it stays sharp on a high-density screen and
    when opened at full size. (In a 1,280 px window the column is 676 px: a figure as wide as it allows, 7 inches
    and its margin, is shown at 0.96 of its size there at the least.) Closed solutions are not measured."""
    pages = [visit.page for visit in visits.values()
             if any(image["drawn_by_a_cell"] for image in visit.report["images"])]
    assert pages, "no figure drawn by a cell on any page: nothing was checked"
    found = []
    for page in pages:
        browser.get(base_url + page)
        browser.execute_async_script(PAGE_REPORT)  # waits for the images
        for image in browser.execute_script(FIGURES):
            where = f"{page}: {image['src']}"
            if image["shown"] < 0.99 * image["pixels"] / 2:
                found.append(f"{where}: drawn for {image['pixels'] // 2} px, shown at {image['shown']} px")
            if image["pixels"] < 1.9 * image["shown"]:
                found.append(f"{where}: {image['pixels']} px shown at {image['shown']} px, not sharp")
            if not image["number"].startswith("Fig."):
                found.append(f"{where}: no figure number")
    assert not found, "\n".join(found)


def test_figures_keep_their_shape_at_every_width(visits):
    """Each figure's shown width over height is its file's, on a phone, a tablet and a desktop: where the column is
    narrower than the figure was drawn, its height shrinks with its width. A ratio off by more than 2% (a pixel or
    two of rounding on a small figure) is a fault."""
    def out_of_shape(visit):
        return [f"{image['src']} at {width} px: shown {image['shown']:.2f} wide per unit of height at "
                f"{image['width']} px wide, drawn {image['file']:.2f}"
                for width, images in visit.report["shapes"].items() for image in images
                if abs(image["shown"] / image["file"] - 1) > 0.02]
    measured = sum(len(images) for visit in visits.values() for images in visit.report["shapes"].values())
    assert measured, "no figure was shown at any width"
    found = failures(visits, out_of_shape)
    assert not found, f"{len(found)} of {measured} figures shown out of shape:\n" + "\n".join(found)


def test_no_printed_output_scrolls_sideways(visits):
    """Each line a cell prints fits its output box in the 676 px column of a 1,280 px window: a line that ran past it
    (30 losses on one line, a model's repr) hid its end behind a scroll bar. The longest line of each such output
    is named. Closed solutions are not measured."""
    assert sum(visit.report["printed_outputs"] for visit in visits.values()), "no page prints anything"
    assert not failures(visits, lambda visit: [f"scrolls sideways: {line!r}" for line in visit.report["wide_outputs"]])


def test_a_click_on_a_figure_opens_it_at_full_size(browser, base_url, visits):
    from selenium.webdriver.common.by import By

    page = next((visit.page for visit in visits.values()
                 if any(image["src"].startswith("../_images/") for image in visit.report["images"])), None)
    if page is None:
        pytest.skip("no page of this site has a figure drawn by a cell")
    browser.get(base_url + page)
    images = browser.find_elements(By.CSS_SELECTOR, ".cell_output img")
    # Sphinx links an image drawn at a set size (a numbered figure's) to its file; figures.js links the others.
    linked = [image for image in images if image.find_elements(By.XPATH, "parent::a")
              and image.find_element(By.XPATH, "parent::a").get_attribute("href") == image.get_attribute("src")]
    assert images and len(linked) == len(images), f"{page}: {len(linked)} of {len(images)} figures open full size"


def test_headings_are_in_order(visits):
    """One h1 per page, first; no level skipped on the way down (h2 -> h4)."""
    def out_of_order(visit):
        headings = visit.report["headings"]
        if not headings:
            return ["no headings"]
        found = []
        if headings[0][0] != 1 or sum(level == 1 for level, _ in headings) != 1:
            found.append(f"needs exactly one h1, first: {headings[:3]}")
        for (previous, _), (level, title) in zip(headings, headings[1:], strict=False):
            if level > previous + 1:
                found.append(f"h{previous} is followed by h{level} ({title!r})")
        return found
    assert not failures(visits, out_of_order)


def test_code_cells_have_a_copy_button(visits):
    def missing(visit):
        report = visit.report
        lacking = report["code_cells"] - report["copy_buttons"]
        return [f"{lacking} of {report['code_cells']} code cells have no copy button"] if lacking else []
    assert not failures(visits, missing)
    assert sum(visit.report["code_cells"] for visit in visits.values()) > 0


def test_no_page_repeats_an_id(visits):
    """A repeated id is invalid HTML, and a link or a screen reader reaches only its first element."""
    assert not failures(visits, lambda visit: [f"repeated id {name!r}" for name in visit.report["repeated_ids"]])
    assert sum(visit.report["solutions"] for visit in visits.values()) > 1  # pages with several solutions were seen


class _Anchors(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("id", "name") and value:
                self.ids.add(value)


@functools.cache
def anchors(path: Path) -> frozenset:
    parser = _Anchors()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return frozenset(parser.ids)


def test_every_internal_link_and_anchor_resolves(visits, base_url):
    broken = set()
    for visit in visits.values():
        for link in visit.report["links"]:
            if not link.startswith(base_url):
                continue  # another site (a paper's DOI, a mailto): not checked offline
            parts = urlsplit(link)
            path = SITE / unquote(parts.path).lstrip("/")
            if path.is_dir():
                path = path / "index.html"
            if not path.is_file():
                broken.add(f"{visit.page}: {link} (no such file)")
            elif parts.fragment and path.suffix == ".html" and unquote(parts.fragment) not in anchors(path):
                broken.add(f"{visit.page}: {link} (no such anchor)")
    assert not sorted(broken)


def test_each_notebook_page_offers_its_executed_notebook(visits):
    """A page with code cells links its .ipynb, and that file is a valid notebook with the outputs of this build."""
    problems = []
    for visit in visits.values():
        if not visit.report["code_cells"]:
            continue
        links = sorted(set(visit.report["notebook"]))
        if not links:
            problems.append(f"{visit.page}: no .ipynb download link")
            continue
        for link in links:
            with urllib.request.urlopen(link, timeout=30) as response:
                notebook = nbformat.reads(response.read().decode("utf-8"), as_version=4)
            nbformat.validate(notebook)
            outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
            if not outputs:
                problems.append(f"{visit.page}: {link} has no outputs: it was not executed")
            problems += [f"{visit.page}: {link} holds an error" for output in outputs if output.output_type == "error"]
    assert not problems


def test_solutions_are_hidden_until_their_toggle_is_clicked(browser, base_url, visits):
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.expected_conditions import visibility_of
    from selenium.webdriver.support.ui import WebDriverWait

    pages = [visit.page for visit in visits.values() if visit.report["solutions"]]
    if not pages:
        pytest.skip("no page of this site has a solution")
    problems = []
    for page in pages:
        browser.get(base_url + page)
        for number, solution in enumerate(browser.find_elements(By.CSS_SELECTOR, ".solution.dropdown"), start=1):
            body = solution.find_elements(By.CSS_SELECTOR, ":scope > section, :scope > :not(.admonition-title)")
            if not body:
                problems.append(f"{page}: solution {number} has no content")
                continue
            if any(part.is_displayed() for part in body):
                problems.append(f"{page}: solution {number} is visible before its toggle is clicked")
            button = solution.find_element(By.CSS_SELECTOR, "button.toggle-button")  # the title also holds a link
            browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", button)
            button.click()
            try:
                WebDriverWait(browser, 5).until(visibility_of(body[0]))  # the theme animates the opening
            except TimeoutException:
                problems.append(f"{page}: solution {number} is still hidden after its toggle was clicked")
    assert not problems


def test_a_click_on_a_solutions_title_opens_it_in_place(browser, base_url, visits):
    """Most of a solution's title is a link to its exercise; clicking it opens the solution, and the page stays."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.expected_conditions import visibility_of
    from selenium.webdriver.support.ui import WebDriverWait

    page = next((visit.page for visit in visits.values() if visit.report["solutions"]), None)
    if page is None:
        pytest.skip("no page of this site has a solution")
    browser.get(base_url + page)
    solution = browser.find_element(By.CSS_SELECTOR, ".solution.dropdown")
    link = solution.find_element(By.CSS_SELECTOR, ".admonition-title a.reference")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", link)
    before = browser.execute_script("return [location.href, window.scrollY];")
    link.click()
    body = solution.find_element(By.CSS_SELECTOR, ":scope > section")
    WebDriverWait(browser, 5).until(visibility_of(body))
    assert browser.execute_script("return [location.href, window.scrollY];") == before, "the click scrolled away"


@pytest.mark.parametrize("window_width", ["phone", "desktop"], indirect=True)
def test_the_chapter_map_links_each_chapter(browser, base_url, window_width):
    """On the introduction, a chapter's name on the map opens its page; on a phone the map scrolls in its frame."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(base_url + "book/intro.html")
    links = WebDriverWait(browser, 10).until(
        lambda driver: driver.find_elements(By.CSS_SELECTOR, ".chapter-map-frame svg a"))
    assert len(links) >= 20, f"{len(links)} chapter links on the map"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", links[0])
    browser.save_screenshot(str(SCREENSHOTS / f"chapter-map-{window_width}px.png"))
    assert browser.execute_script("return document.documentElement.scrollWidth <= innerWidth")
    cue = browser.execute_script("const cue = document.querySelector('.chapter-map-cue');"
                                 "return cue && cue.getBoundingClientRect().height > 0;")
    assert cue == (window_width < 700), f"the cue that the map scrolls sideways is {'' if cue else 'not '}shown at " \
                                        f"{window_width} px"
    target = links[-1].get_dom_attribute("href").split("/")[-1]
    browser.execute_script("arguments[0].scrollIntoView({block: 'center', inline: 'center'});", links[-1])
    links[-1].find_element(By.CSS_SELECTOR, "text").click()
    WebDriverWait(browser, 10).until(lambda driver: driver.current_url.endswith(target))


@pytest.mark.parametrize("window_width", ["phone", "desktop"], indirect=True)
def test_the_landing_page_says_where_to_start_above_the_fold(browser, base_url, window_width):
    from selenium.webdriver.common.by import By

    browser.get(base_url + "book/intro.html")
    start = browser.find_element(By.XPATH, "//article//p[strong[starts-with(., 'Start here')]]/a")
    assert start.get_attribute("href").endswith("/tokenization.html")
    top = browser.execute_script("return arguments[0].getBoundingClientRect().bottom <= innerHeight;", start)
    assert top, f"the 'Start here' link is below the first screen at {window_width} px"


WEIGHT = """
const done = arguments[arguments.length - 1];
window.setTimeout(() => {  // after the page's last requests (fonts, MathJax's own files)
  const icon = document.querySelector(".article-header-buttons i.fa-download");
  done({
    bytes: [...performance.getEntriesByType("navigation"), ...performance.getEntriesByType("resource")]
      .reduce((sum, entry) => sum + entry.decodedBodySize, 0),
    files: performance.getEntriesByType("resource").map(entry => [entry.name, entry.decodedBodySize]),
    icon_drawn: !!icon && getComputedStyle(icon, "::before").content !== "none"
      && document.fonts.check('900 16px "Font Awesome 6 Free"'),
  });
}, 1000);
"""


def test_the_landing_page_loads_under_two_megabytes_with_its_icons(browser, base_url):
    """What a reader's first visit loads, uncompressed: the page and every file it asks for."""
    browser.get(base_url + "book/intro.html")
    browser.execute_async_script(PAGE_REPORT)
    weight = browser.execute_async_script(WEIGHT)
    largest = sorted(weight["files"], key=lambda file: -file[1])[:5]
    assert weight["bytes"] < 2_000_000, f"the landing page loads {weight['bytes']:,} bytes; the largest: {largest}"
    assert weight["icon_drawn"], "the download button's icon is not drawn by the theme's icon font"


@pytest.mark.parametrize("window_width", ["phone"], indirect=True)
def test_a_tap_on_a_page_contents_link_closes_the_drawer(browser, base_url, window_width):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(base_url + "book/attention.html")
    visible_button(browser, ".secondary-toggle").click()
    WebDriverWait(browser, 5).until(lambda driver: driver.execute_script(NAVIGATION)["contents_dialog"])
    link = browser.find_elements(By.CSS_SELECTOR, "#pst-secondary-sidebar-modal a.reference")[-1]
    target = link.get_attribute("href").split("#")[-1]
    link.click()
    WebDriverWait(browser, 5).until(lambda driver: not driver.execute_script(NAVIGATION)["contents_dialog"])
    assert browser.current_url.endswith("#" + target)


def test_search_finds_attention_and_quotes_the_chapters_text(browser, base_url):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(base_url + "search.html?q=attention")
    results = WebDriverWait(browser, 30).until(
        lambda driver: driver.find_elements(By.CSS_SELECTOR, "#search-results ul.search li a"))
    assert results, "searching for 'attention' returned nothing"
    for result in results:
        assert result.get_attribute("href").startswith(base_url)
    snippets = WebDriverWait(browser, 30).until(
        lambda driver: driver.find_elements(By.CSS_SELECTOR, "#search-results ul.search li p.context"))
    theme_text = [snippet.text for snippet in snippets if any(
        word in snippet.text for word in (".pdf", "Contents", "Toggle"))]
    assert snippets and not theme_text, f"search snippets quote the theme: {theme_text[:3]}"


def test_search_for_bpe_ranks_the_tokenization_chapter_near_the_top(browser, base_url, visits):
    """The glossary's entry may come first; the chapter that builds BPE must follow close behind."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    if "book/tokenization.html" not in visits:
        pytest.skip("this site has no tokenization chapter")
    browser.get(base_url + "search.html?q=BPE")
    results = WebDriverWait(browser, 30).until(
        lambda driver: driver.find_elements(By.CSS_SELECTOR, "#search-results ul.search li a"))
    pages = [urlsplit(result.get_attribute("href")).path for result in results]
    assert any(page.endswith("/tokenization.html") for page in pages[:3]), pages[:5]


def test_screenshots_in_light_and_dark_mode(browser, base_url, visits):
    """The introduction and a chapter with figures, as a reader sees them, saved for review; dark mode follows
    the reader's system setting."""
    chapters = [visit.page for visit in visits.values() if visit.page.startswith("book/") and any(
        image["src"].startswith("../_images/") and not image["src"].endswith(".svg")
        for image in visit.report["images"])]
    preferred = [page for page in chapters if page.endswith("/attention.html")]
    chapter = (preferred or chapters or [None])[0]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for scheme in ("light", "dark"):
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia",
                                {"features": [{"name": "prefers-color-scheme", "value": scheme}]})
        for name, page in (("intro", "book/intro.html"), ("chapter", chapter)):
            if page is None or page not in visits:
                continue
            browser.get(base_url + page)
            report = browser.execute_async_script(PAGE_REPORT)
            assert report["theme"] == scheme, f"{page} shows the {report['theme']!r} theme in {scheme} mode"
            # The chapter at its first figure; the introduction at its chapter map, if it has one.
            figure = browser.execute_script(
                "const image = document.querySelector('.cell_output img, img[src*=\"chapter_map\"]');"
                "if (image) image.scrollIntoView({block: 'center'});"
                "return image && getComputedStyle(image).backgroundColor;")
            if scheme == "dark" and name == "chapter":
                # Figures are drawn to read on both themes (minformers.support.plotting): no light panel behind them.
                assert figure == "rgba(0, 0, 0, 0)", f"{page}: figures sit on {figure} in dark mode"
            browser.save_screenshot(str(SCREENSHOTS / f"{name}-{scheme}.png"))
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    assert (SCREENSHOTS / "intro-light.png").exists()


# What a reader can reach at a width: the chapter list and the page contents, each either a column beside the page
# or a dialog opened by its button in the article header.
NAVIGATION = """
const shown = node => !!node && node.getBoundingClientRect().width > 0
  && getComputedStyle(node).visibility !== "hidden";
const dialog = id => document.getElementById(id);
return {
  chapters_column: shown(document.getElementById("pst-primary-sidebar")),
  contents_column: shown(document.getElementById("pst-secondary-sidebar")),
  chapters_dialog: dialog("pst-primary-sidebar-modal").open,
  contents_dialog: dialog("pst-secondary-sidebar-modal").open,
  chapter_links: dialog("pst-primary-sidebar-modal").querySelectorAll("a.reference").length,
  contents_links: dialog("pst-secondary-sidebar-modal").querySelectorAll("a.reference").length,
};
"""
WIDTHS = {"phone": 390, "tablet": 900, "desktop": 1400}


def visible_button(browser, selector: str):
    from selenium.webdriver.common.by import By

    buttons = [button for button in browser.find_elements(By.CSS_SELECTOR, selector) if button.is_displayed()]
    return buttons[0] if buttons else None


@pytest.fixture
def window_width(browser, request):
    """The browser at the width the test names, and back at the suite's usual size afterwards."""
    browser.set_window_size(WIDTHS[request.param], 900)
    yield WIDTHS[request.param]
    browser.set_window_size(1280, 1000)


@pytest.mark.parametrize("window_width", ["phone", "tablet"], indirect=True)
def test_the_menu_buttons_open_the_chapter_list_and_page_contents(browser, base_url, window_width):
    """Below 960 px both lists are hidden; their buttons open each as a dialog, with its links."""
    import time

    browser.get(base_url + "book/attention.html")
    before = browser.execute_script(NAVIGATION)
    assert not before["chapters_column"] and not before["contents_column"]
    for selector, opened, links in ((".primary-toggle", "chapters_dialog", "chapter_links"),
                                    (".secondary-toggle", "contents_dialog", "contents_links")):
        button = visible_button(browser, selector)
        assert button is not None, f"no visible {selector} button at {window_width} px"
        button.click()
        time.sleep(0.3)
        state = browser.execute_script(NAVIGATION)
        assert state[opened], f"{selector} did not open its list at {window_width} px"
        assert state[links] > 5, f"the {opened} holds {state[links]} links"
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(SCREENSHOTS / f"{opened.replace('_', '-')}-{window_width}px.png"))
        browser.execute_script("document.querySelectorAll('dialog[open]').forEach(dialog => dialog.close());")


@pytest.mark.parametrize("window_width", ["desktop"], indirect=True)
def test_the_menu_button_folds_the_chapter_list_on_a_wide_screen(browser, base_url, window_width):
    browser.get(base_url + "book/attention.html")
    state = browser.execute_script(NAVIGATION)
    assert state["chapters_column"] and state["contents_column"], "a wide screen shows both lists beside the page"
    button = visible_button(browser, ".primary-toggle")
    button.click()
    assert not browser.execute_script(NAVIGATION)["chapters_column"], "the menu button did not fold the chapter list"
    button.click()
    assert browser.execute_script(NAVIGATION)["chapters_column"], "a second click did not bring the chapter list back"


@pytest.mark.parametrize("window_width", ["phone", "tablet", "desktop"], indirect=True)
def test_one_search_box_at_every_width(browser, base_url, window_width):
    browser.get(base_url + "book/attention.html")
    shown = browser.execute_script("""return Array.from(document.querySelectorAll(".search-button__button"))
      .filter(node => node.getBoundingClientRect().width > 0 && getComputedStyle(node).visibility !== "hidden")
      .length;""")
    assert shown == 1, f"{shown} search boxes or buttons at {window_width} px"


OVERFLOW = """
const done = arguments[arguments.length - 1];
const mathjax = window.MathJax && window.MathJax.startup && window.MathJax.startup.promise;
const page = document.documentElement;
(mathjax || Promise.resolve()).then(() => done(page.scrollWidth - page.clientWidth));
"""


@pytest.mark.parametrize("window_width", ["phone", "tablet"], indirect=True)
def test_no_page_scrolls_sideways(browser, base_url, visits, window_width):
    """Wide code, tables and formulas scroll inside their own boxes; the page itself never does."""
    wider = {}
    for page in visits:
        browser.get(base_url + page)
        excess = browser.execute_async_script(OVERFLOW)
        if excess > 0:
            wider[page] = f"{excess} px wider than the window"
    assert not wider, f"at {window_width} px: {wider}"
