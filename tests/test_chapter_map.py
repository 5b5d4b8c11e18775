"""The chapter map on the introduction (book/_static/chapter_map.svg, drawn by hand) stays in step with _toc.yml."""

import xml.etree.ElementTree as ElementTree
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SVG = "{http://www.w3.org/2000/svg}"
NOT_MAPPED = {"Reference", "For instructors and contributors"}  # look-up pages and guides, not chapters


def test_the_chapter_map_shows_every_part_with_its_number_of_chapters():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    expected = {part["caption"]: len(part["chapters"]) for part in toc["parts"] if part["caption"] not in NOT_MAPPED}
    drawing = ElementTree.parse(ROOT / "book" / "_static" / "chapter_map.svg").getroot()
    drawn = {group.get("data-part"): len(group.findall(f".//{SVG}text[@class='chapter']"))
             for group in drawing.iter(f"{SVG}g") if group.get("data-part")}
    assert drawn == expected, "update book/_static/chapter_map.svg, and its alt text in book/intro.md, for _toc.yml"


def test_the_chapter_map_has_a_title_and_a_description_for_screen_readers():
    drawing = ElementTree.parse(ROOT / "book" / "_static" / "chapter_map.svg").getroot()
    assert drawing.find(f"{SVG}title").text and drawing.find(f"{SVG}desc").text
    assert ":alt: Chapter map." in (ROOT / "book" / "intro.md").read_text()


def test_each_chapter_on_the_map_links_its_page():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    expected = [chapter["file"].split("/")[-1] for part in toc["parts"] if part["caption"] not in NOT_MAPPED
                for chapter in part["chapters"]]
    drawing = ElementTree.parse(ROOT / "book" / "_static" / "chapter_map.svg").getroot()
    links = [link.get("href") for group in drawing.iter(f"{SVG}g") if group.get("data-part")
             for link in group.iter(f"{SVG}a")]
    assert links == [f"../book/{name}.html" for name in expected]


def test_each_chapter_names_the_earlier_chapters_it_builds_on():
    """`builds_on` in a chapter's front matter is shown under its title (tools/course_site): every chapter has
    one, and it names only chapters a reader meets before it."""
    from build_book import front_matter

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    order = [chapter["file"].split("/")[-1] for part in toc["parts"] if part["caption"] not in NOT_MAPPED
             for chapter in part["chapters"]]
    for position, name in enumerate(order):
        builds_on = front_matter(ROOT / "book" / f"{name}.md").get("builds_on")
        assert isinstance(builds_on, list), f"{name}.md has no builds_on list in its front matter"
        later = [other for other in builds_on if other not in order[:position]]
        assert not later, f"{name} builds on {later}, which are not earlier chapters"
