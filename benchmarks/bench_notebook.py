"""``%inspect_model`` end to end in a Jupyter kernel, against ``torchinfo.summary`` of the
same model and input in the same kernel.

    flock /tmp/nbinspect-bench.lock .venv/bin/python benchmarks/bench_notebook.py [--rounds 3]

Starts an IPython kernel (jupyter_client; the kernel inherits this process's environment,
PYTHONPATH included, so the same script measures another checkout), builds GPT-2 small
(``GPT2Config()``, random init) and an 8-layer Llama (``LlamaConfig``, random init, no
download), loads the extension, then runs cells and times each from the execute request
to the kernel's reply: the magic's whole kernel side (source, statistics, trace, memory
plan, the widget's payload and the display message) and torchinfo's summary and the
display of its table. First the first call of each (torchinfo's first, then the magic's:
the magic's first call still pays loading pandas, the widget and the trace's setup), then
`rounds` rounds in turn (best and median). CPU seconds are the kernel process's (every
thread) over the same cells. torchinfo is the ``bench`` extra (``pip install -e .[bench]``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import psutil
from _measure import compile_sources
from jupyter_client.manager import start_new_kernel

MODELS = """\
transformers.logging.set_verbosity_error()
torch.manual_seed(0)
gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config()).eval()
llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(
    vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
    num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=512)).eval()
%load_ext nbinspect
"""  # GPT-2 small and an 8-layer Llama, random init (no download); bench_lab.py builds the same
SETUP = "import time, torch, torchinfo, transformers\n" + MODELS
CASES = {
    "gpt2 --input-shape 1,128 --dtype int64": (
        "%inspect_model gpt2 --input-shape 1,128 --dtype int64",
        "torchinfo.summary(gpt2, input_size=(1, 128), dtypes=[torch.long], verbose=0)",
    ),
    "gpt2 ... --batch-size 8 --optimizer adamw": (
        "%inspect_model gpt2 --input-shape 1,128 --dtype int64 --batch-size 8 --optimizer adamw",
        "torchinfo.summary(gpt2, input_size=(1, 128), dtypes=[torch.long], verbose=0)",
    ),
    "llama (8 layers) --input-shape 1,128 --dtype int64": (
        "%inspect_model llama --input-shape 1,128 --dtype int64",
        "torchinfo.summary(llama, input_size=(1, 128), dtypes=[torch.long], verbose=0)",
    ),
}


class Kernel:
    def __init__(self) -> None:
        # started in a folder of its own: the kernel puts its working folder first on sys.path
        self.folder = tempfile.TemporaryDirectory()
        self.manager, self.client = start_new_kernel(kernel_name="python3", env=dict(os.environ), cwd=self.folder.name)
        self.process = psutil.Process(self.manager.provisioner.process.pid)

    def run(self, code: str) -> tuple[float, float]:
        """(wall, CPU) seconds of one cell, from the request to the reply; errors raise."""
        cpu = self.process.cpu_times()
        start = time.perf_counter()
        reply = self.client.execute_interactive(code, timeout=900, output_hook=lambda msg: None)
        wall = time.perf_counter() - start
        after = self.process.cpu_times()
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"{code!r}: {reply['content'].get('ename')}: {reply['content'].get('evalue')}")
        return wall, (after.user + after.system) - (cpu.user + cpu.system)

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)
        self.folder.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    compile_sources()  # as installed: the first calls do not compile nbinspect
    print(f"load average {os.getloadavg()[0]:.1f}; PYTHONPATH={os.environ.get('PYTHONPATH', '')}")
    kernel = Kernel()
    try:
        kernel.run(SETUP)
        kernel.client.execute_interactive(
            "import nbinspect; print(nbinspect.__file__)",
            output_hook=lambda m: (
                print("  nbinspect from", m["content"].get("text", "").strip()) if m["msg_type"] == "stream" else None
            ),
        )
        kernel.run("time.sleep(2)")  # the kernels' background warm-up, as while a user reads the first cell
        for label, (magic, baseline) in CASES.items():
            first_base, first_ours = kernel.run(baseline), kernel.run(magic)
            times: dict[str, list[tuple[float, float]]] = {"torchinfo": [], "magic": []}
            for _ in range(args.rounds):
                times["torchinfo"].append(kernel.run(baseline))
                times["magic"].append(kernel.run(magic))
            base, ours = ([w for w, _ in times[k]] for k in ("torchinfo", "magic"))
            base_cpu, ours_cpu = (min(c for _, c in times[k]) for k in ("torchinfo", "magic"))
            print(f"\n%inspect_model {label}   (load {os.getloadavg()[0]:.1f})")
            print(f"  first call: torchinfo {first_base[0]:.2f} s, magic {first_ours[0]:.2f} s")
            print(
                f"  wall best/median: torchinfo {min(base):.3f}/{statistics.median(base):.3f} s, "
                f"magic {min(ours):.3f}/{statistics.median(ours):.3f} s   "
                f"ratio {min(ours) / min(base):.2f}x best, "
                f"{statistics.median(ours) / statistics.median(base):.2f}x median"
            )
            print(
                f"  kernel CPU best: torchinfo {base_cpu:.3f} s, magic {ours_cpu:.3f} s   "
                f"ratio {ours_cpu / base_cpu:.2f}x"
            )
    finally:
        kernel.close()


if __name__ == "__main__":
    main()
