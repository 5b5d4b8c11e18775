"""The build clock (tools/build_clock.py): the machine factor it measures, and the CI projection made from it."""

import json

import pytest

import build_clock
from minformers.support.runtime import DEFAULT_THREADS


@pytest.mark.slow
def test_the_factor_is_the_median_workload_time_over_the_reference_time():
    clock = build_clock.measure(repeats=3)
    assert set(clock["parts"]) == {"kernel start", "GPT steps", "BERT steps", "tokenizer"}
    assert all(seconds > 0 for seconds in clock["parts"].values())
    assert clock["factor"] == sorted(clock["repeats"])[1] > 0
    assert clock["threads"] == DEFAULT_THREADS
    assert build_clock.describe(clock).startswith(f"machine factor {clock['factor']:.2f} (median of 3 calibrations")


def test_the_factor_weighs_each_part_by_its_share_of_the_book():
    assert set(build_clock.WEIGHTS) == set(build_clock.REFERENCE_SECONDS) == set(build_clock.WORKLOAD)
    assert sum(build_clock.WEIGHTS.values()) == pytest.approx(1.0)


def test_the_tokenizer_part_merges_pairs_as_bpe_does():
    assert build_clock.merge(("l", "o", "w", "l", "o"), ("l", "o")) == ("lo", "w", "lo")
    assert build_clock.merge(("a", "a", "a"), ("a", "a")) == ("aa", "a")  # left to right, no overlaps


def timings_with_factor(tmp_path, factor: float):
    path = tmp_path / "timings.json"
    path.write_text(json.dumps({"clock": build_clock.given(factor), "pages": {}}))
    return path


@pytest.mark.parametrize(("seconds", "factor", "expected", "code"), [
    (1000, 1.0, 2000, 0),  # twice as long on a machine twice as slow
    (2000, 1.0, 4000, 1),  # over the 3,600 s that CI may take there
    (3000, 2.0, 3000, 0),  # this machine is already of factor 2
])
def test_the_ci_projection_scales_by_the_measured_factor(tmp_path, capsys, seconds, factor, expected, code):
    assert build_clock.project_ci(seconds, timings_with_factor(tmp_path, factor)) == code
    printed = capsys.readouterr().out
    assert f"would take about {expected} s, {'within' if code == 0 else 'OVER'} its limit of 3600 s" in printed


def test_calibrations_before_and_after_a_build_combine_into_the_median_of_all_their_repeats():
    before = {**build_clock.given(1.1), "repeats": [1.0, 1.2, 1.1]}
    after = {**build_clock.given(1.4), "repeats": [1.4, 1.3, 1.5]}
    clock = build_clock.combine(before, after)
    assert clock["factor"] == pytest.approx(1.25)  # between 1.2 and 1.3, the middle two of six
    assert (clock["before"], clock["after"]) == (1.1, 1.4)
    assert "1.25, the median of all 6 readings (1.10 before the build, 1.40 after)" in build_clock.describe(clock)
    assert build_clock.combine(build_clock.given(2.0), build_clock.given(2.0))["factor"] == 2.0  # given, not measured


def test_readings_taken_between_the_pages_count_as_much_as_the_calibrations(tmp_path):
    before = {**build_clock.given(1.1), "repeats": [1.0, 1.2, 1.1]}
    after = {**build_clock.given(1.4), "repeats": [1.4, 1.3, 1.5]}
    probes = tmp_path / "probes.txt"
    assert build_clock.probed(probes) == []  # no probe ran: the file is absent
    probes.write_text("1.6\n1.7\n1.8\n")
    clock = build_clock.combine(before, after, build_clock.probed(probes))
    assert clock["factor"] == pytest.approx(1.4)  # the 5th of 9: 1.0 1.1 1.2 1.3 [1.4] 1.5 1.6 1.7 1.8
    assert clock["during"] == [1.6, 1.7, 1.8]
    assert ("1.40, the median of all 9 readings (1.10 before the build, 3 between pages from 1.60 to 1.80, "
            "1.40 after)") in build_clock.describe(clock)


def test_the_build_times_the_machine_before_every_fourth_page_that_runs_code(tmp_path, monkeypatch):
    from course_site import timings

    probes = tmp_path / "probes.txt"
    monkeypatch.setattr(build_clock, "probe", lambda path: open(path, "a").write("2.0\n"))
    monkeypatch.setattr(timings, "pages_with_code", 0)
    monkeypatch.delenv(build_clock.PROBES, raising=False)
    timings.time_the_machine(None, "book/a", ["```{code-cell} ipython3\n```"])  # no build_book: no probe
    assert build_clock.probed(probes) == []
    monkeypatch.setenv(build_clock.PROBES, str(probes))
    for index in range(10):
        timings.time_the_machine(None, f"book/p{index}", ["```{code-cell} ipython3\n```"])
        timings.time_the_machine(None, f"book/prose{index}", ["# prose only"])  # not counted
    assert build_clock.probed(probes) == [2.0, 2.0]  # before the 4th and the 8th


def book_of(tmp_path, sources: dict[str, str]):
    """A book root holding `sources` (page -> text) and a record of the pages' reference seconds beside it."""
    for page, text in sources.items():
        (tmp_path / f"{page}.md").parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f"{page}.md").write_text(text)
    return tmp_path, tmp_path / "reference_pages.json"


def code_page(code: str) -> str:
    return f"# A page\n\n```{{code-cell}} ipython3\n{code}\n```\n"


def ran(seconds: float, **record) -> dict:
    return {"seconds": seconds, "succeeded": True, "method": "force", **record}


def test_a_full_build_is_timed_by_the_median_of_its_unchanged_pages(tmp_path, monkeypatch):
    import page_clock

    monkeypatch.setattr(page_clock, "MIN_PAGES", 3)
    root, reference = book_of(tmp_path, {f"book/p{index}": code_page(f"work({index})") for index in range(6)})
    page_clock.record(root, [{"clock": {"factor": 1.0}, "pages": {f"book/p{index}": ran(10.0) for index in range(6)}}],
                      reference)
    (root / "book/p5.md").write_text(code_page("work(5, more=True)"))  # its code changed: measured, not measuring
    (root / "book/p0.md").write_text("Prose edited.\n" + code_page("work(0)"))  # its prose only: still measuring
    pages = {"book/p0": ran(18.0), "book/p1": ran(20.0), "book/p2": ran(22.0), "book/p3": ran(90.0),
             "book/p4": {**ran(40.0), "method": "cache"},  # a recorded time, not this build's
             "book/p5": ran(99.0)}
    clock = page_clock.clock(root, pages, workload=build_clock.given(1.5), reference_file=reference)
    assert clock["factor"] == pytest.approx(2.1)  # median of 1.8, 2.0, 2.2 and 9.0
    assert (clock["unchanged_pages"], clock["workload"]) == (4, 1.5)
    assert "2.10, the median of its 4 unchanged pages" in page_clock.describe(clock)
    pages["book/p3"]["succeeded"] = pages["book/p2"]["succeeded"] = False
    fallback = page_clock.clock(root, pages, workload=build_clock.given(1.5), reference_file=reference)
    assert fallback["factor"] == 1.5  # two unchanged pages are too few: the workload's reading stands
    assert "fewer than 3" in page_clock.describe(fallback)


def test_a_record_takes_each_page_from_the_builds_that_ran_its_current_source(tmp_path):
    import page_clock

    root, reference = book_of(tmp_path, {"book/a": code_page("new()")})
    old = page_clock.source_digest(root / "book/a.md")[::-1]
    builds = [{"clock": {"factor": 2.0}, "pages": {"book/a": ran(30.0, source=old)}},  # the page before its change
              {"clock": {"factor": 2.0}, "pages": {"book/a": ran(20.0)}},
              {"clock": {"factor": 1.0}, "pages": {"book/a": ran(12.0)}}]
    recorded = page_clock.record(root, builds, reference)
    assert recorded["book/a"]["reference_seconds"] == pytest.approx(11.0)  # median of 10 and 12, not 15
    assert json.loads(reference.read_text())["pages"] == recorded


def test_the_record_still_times_the_book():
    """Enough pages are unchanged since tools/reference_pages.json for a full build to time itself by them; when
    this fails, record the pages again from a clean build (tools/page_clock.py)."""
    import page_clock

    reference = json.loads(page_clock.REFERENCE_PAGES.read_text())["pages"]
    unchanged = [page for page, recorded in reference.items()
                 if (page_clock.ROOT / f"{page}.md").exists()
                 and page_clock.source_digest(page_clock.ROOT / f"{page}.md") == recorded["source"]]
    assert len(unchanged) >= page_clock.MIN_PAGES + 5, f"only {len(unchanged)} recorded pages are unchanged"


def test_an_edit_that_keeps_the_work_keeps_the_reference_seconds(tmp_path):
    import page_clock

    root, reference = book_of(tmp_path, {"book/a": code_page("plot(color='gray')")})
    page_clock.record(root, [{"clock": {"factor": 2.0}, "pages": {"book/a": ran(20.0)}}], reference)
    (root / "book/a.md").write_text(code_page("plot(color=INK)"))
    assert page_clock.ratios(root, {"book/a": ran(20.0)}, json.loads(reference.read_text())["pages"]) == {}
    page_clock.same_work(root, ["book/a"], reference)
    recorded = json.loads(reference.read_text())["pages"]
    assert recorded["book/a"]["reference_seconds"] == 10.0
    assert page_clock.ratios(root, {"book/a": ran(20.0)}, recorded) == {"book/a": 2.0}
