"""The parts of the site's Sphinx extension (tools/course_site) that need no build: alt text from a cell's source,
launch-button settings."""

import doctest
from types import SimpleNamespace

from course_site import alt_text
from course_site.alt_text import figure_titles
from course_site.notebooks import launch_buttons_need_a_repository


def test_docstring_examples_hold():
    result = doctest.testmod(alt_text)
    assert result.attempted > 0 and result.failed == 0


def test_figure_titles_come_in_source_order_with_their_axes():
    source = """%matplotlib inline
fig, (left, right) = figure(1, 2)
label(left, "Sinusoidal encodings ($d_{model}$ = 64)", "position", "channel")
label(right, f"RoPE, theta = {theta:,.0f}", "distance", y_label)
fig.suptitle(title)
plt.title('Attention weights')
label(ax, f"Layer {layer}", "key", "query")
"""
    assert figure_titles(source) == [  # no "..." for a value known only when the cell runs
        "Sinusoidal encodings (d_model = 64) (channel against position)",
        "Attention weights",
        "query against key",
    ]


def test_a_cell_that_does_not_parse_has_no_titles():
    assert figure_titles("label(ax, 'unclosed") == []


def configured(repository_url: str, **buttons) -> dict:
    options = {"repository_url": repository_url, "launch_buttons": {"binderhub_url": "https://mybinder.org", **buttons}}
    launch_buttons_need_a_repository(None, SimpleNamespace(html_theme_options=options))
    return options


def test_no_repository_url_means_no_launch_buttons():
    assert "launch_buttons" not in configured("")
    assert "launch_buttons" not in configured("  ")


def test_colab_is_offered_for_github_repositories_only():
    colab = "https://colab.research.google.com"
    assert configured("https://github.com/org/repo", colab_url=colab)["launch_buttons"]["colab_url"] == colab
    gitlab = configured("https://gitlab.com/org/repo", colab_url=colab)["launch_buttons"]
    assert gitlab == {"binderhub_url": "https://mybinder.org", "colab_url": ""}
