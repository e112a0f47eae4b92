"""sims.plots.pyplot registers the fonts matplotlib ships when the user's font cache, shared
with another matplotlib build, lacks them (the CLI answers misuse in one line: twenty
"findfont" warnings on stderr broke that, tests/test_bad_inputs.py's full-disk report)."""

import os
import subprocess
import sys
import textwrap

STALE = textwrap.dedent("""
    from matplotlib import font_manager as fm
    m = fm.fontManager
    ours = ("STIX", "cm", "DejaVu Sans Display")
    m.ttflist = [f for f in m.ttflist if not f.name.startswith(ours)]
    fm.json_dump(m, fm.Path(fm.mpl.get_cachedir()) / f"fontlist-v{fm.FontManager.__version__}.json")
""")

DRAW = textwrap.dedent("""
    import matplotlib
    matplotlib.use("Agg")
    {get}
    fig, ax = plt.subplots()
    ax.set_title(r"$\\lambda \\sum_j N_j d_{{ij}}$")
    fig.savefig(sys.argv[1])
""")


def _run(code, tmp_path, *args):
    env = dict(os.environ, MPLCONFIGDIR=str(tmp_path / "mpl"))
    return subprocess.run([sys.executable, "-c", "import sys\n" + code, *args], env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_stale_font_cache_does_not_reach_stderr(tmp_path):
    (tmp_path / "mpl").mkdir()
    assert _run(STALE, tmp_path).returncode == 0
    # the condition is real: matplotlib itself, on that cache, warns
    plain = _run(DRAW.format(get="import matplotlib.pyplot as plt"), tmp_path,
                 str(tmp_path / "a.svg"))
    assert plain.returncode == 0 and "findfont" in plain.stderr, plain.stderr
    ours = _run(DRAW.format(get="from sims.plots import pyplot\nplt = pyplot()"), tmp_path,
                str(tmp_path / "b.svg"))
    assert ours.returncode == 0 and ours.stderr == "", ours.stderr
    assert (tmp_path / "b.svg").stat().st_size > 0


def test_pyplot_adds_only_the_families_the_list_lacks(monkeypatch):
    from matplotlib import font_manager

    import sims.plots as plots

    fm = font_manager.fontManager
    stale = [f for f in fm.ttflist if not f.name.startswith(("STIX", "cm"))]
    monkeypatch.setattr(fm, "ttflist", list(stale))
    monkeypatch.setattr(plots, "_FONTS_READY", False)
    plots.pyplot()
    names = [f.name for f in fm.ttflist]
    assert {"STIXGeneral", "cmr10", "cmex10"} <= set(names)
    assert fm.ttflist[:len(stale)] == stale  # nothing already there replaced or reordered
    before = {n: [f.name for f in stale].count(n) for n in {f.name for f in stale}}
    assert all(names.count(n) == k for n, k in before.items())  # no family added twice
    n = len(fm.ttflist)
    plots.pyplot()  # once per process
    assert len(fm.ttflist) == n
