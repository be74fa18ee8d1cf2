"""`import nbinspect` loads none of the heavy libraries; each loads when first used."""

import os
import subprocess
import sys

HEAVY = ("pandas", "matplotlib", "anywidget", "ipywidgets", "IPython", "numba")


def _loaded_after(code: str, warm_up: bool = False) -> set[str]:
    env = {**os.environ, "NBINSPECT_WARM_UP": "1" if warm_up else "0"}
    out = subprocess.run(
        [sys.executable, "-c", f"import sys\n{code}\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return set(out.stdout.split())


def test_import_loads_no_heavy_library():
    assert _loaded_after("import nbinspect", warm_up=True) == set()


def test_inspect_loads_pandas_but_not_the_widget_or_plots():
    loaded = _loaded_after("import nbinspect, torch\nprint(nbinspect.inspect(torch.nn.Linear(2, 3)).summary()[:0])")
    assert loaded == {"pandas"}


def test_first_use_loads_the_statistics_kernels_in_the_background():
    code = (
        "import nbinspect, torch\n"
        "from nbinspect.analyze import fused\n"
        "nbinspect.stats\n"
        "fused._warm_up.join()\n"
        "assert fused._loaded['kernels'] is not None\n"
        "assert fused.kernels(fused.LOADED_ABOVE) is fused._loaded['kernels']"
    )
    assert "numba" in _loaded_after(code, warm_up=True)


def test_public_names_resolve_lazily_and_once():
    code = (
        "import nbinspect\n"
        "assert 'stats' not in vars(nbinspect)\n"
        "f = nbinspect.stats\n"
        "assert vars(nbinspect)['stats'] is f"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_fork_during_the_warm_up_waits_for_it():
    """A child forked while the kernels load must not inherit a half-done import (it would
    hang on the import's lock): the fork waits, and the child finds the kernels loaded."""
    code = (
        "import os\n"
        "from nbinspect.analyze import fused\n"
        "fused.warm_up()\n"
        "pid = os.fork()  # at once: the load has just begun\n"
        "if pid == 0:\n"
        "    from nbinspect.analyze import kernels\n"
        "    os._exit(0 if fused._loaded.get('kernels') is kernels else 3)\n"
        "assert os.waitpid(pid, 0)[1] == 0\n"
    )
    env = {**os.environ, "NBINSPECT_WARM_UP": "1"}
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, env=env)  # without the wait the child hangs


def test_a_torch_model_loads_no_other_backend():
    """MLX, vLLM and sharded models cannot exist before their framework is imported, so a
    torch session's first call does not import those backends (0.04–0.07 s)."""
    code = (
        "import sys, nbinspect, torch\n"
        "nbinspect.inspect(torch.nn.Linear(2, 3))\n"
        "others = [m for m in ('mlx', 'vllm', 'distributed') if f'nbinspect.backends.{m}' in sys.modules]\n"
        "assert not others, others\n"
        "import torch.distributed.tensor\n"
        "nbinspect.inspect(torch.nn.Linear(2, 3))\n"
        "assert 'nbinspect.backends.distributed' in sys.modules  # asked, once its framework is loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
