"""`import nbinspect` loads none of the heavy libraries; each loads when first used."""

import subprocess
import sys

HEAVY = ("pandas", "matplotlib", "anywidget", "ipywidgets", "IPython", "numba")


def _loaded_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"import sys\n{code}\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(out.stdout.split())


def test_import_loads_no_heavy_library():
    assert _loaded_after("import nbinspect") == set()


def test_inspect_loads_pandas_but_not_the_widget_or_plots():
    loaded = _loaded_after("import nbinspect, torch\nprint(nbinspect.inspect(torch.nn.Linear(2, 3)).summary()[:0])")
    assert loaded == {"pandas"}


def test_public_names_resolve_lazily_and_once():
    code = (
        "import nbinspect\n"
        "assert 'stats' not in vars(nbinspect)\n"
        "f = nbinspect.stats\n"
        "assert vars(nbinspect)['stats'] is f"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
