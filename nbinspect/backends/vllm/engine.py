"""A ``vllm.LLM`` engine as something to inspect: the served torch model's frames, the
engine's facts (``totals``), what it is made of (the ``components`` frame) and one sample
generation (``io``).

The frames are built where the model lives (:func:`nbinspect.pipeline.worker_report`): in this process when the
engine runs here (``VLLM_ENABLE_V1_MULTIPROCESSING=0``), else inside each worker through
``llm.collective_rpc``. Anything vLLM does not have where nbinspect looks becomes one
:class:`EngineError` line; nothing here changes the engine, which keeps generating.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from typing import Any

import pandas as pd

from ...dtypes import dtype_name
from ...errors import EngineError, first_line
from ...schema import ENGINE_COMPONENTS, ENGINE_TOTALS
from .shards import global_moments, to_plain

__all__ = ["EngineReport", "engine_report", "is_vllm_engine"]

# The worker extension (an entry point, nbinspect/ui/vllm_worker.py) named as vLLM takes it.
EXTENSION = "nbinspect.ui.vllm_worker.InspectWorkerExtension"
Report = Callable[[Any, dict[str, Any]], bytes]  # (worker, options) -> pickled frames
_REACH = (
    "create the LLM with VLLM_ENABLE_V1_MULTIPROCESSING=0 (engine in this process), "
    f"or worker_extension_cls={EXTENSION!r}, or set VLLM_ALLOW_INSECURE_SERIALIZATION=1 before creating it"
)


def is_vllm_engine(obj: Any) -> bool:
    """True for a ``vllm.LLM`` (checked without importing vLLM)."""
    return type(obj).__module__.split(".")[0] == "vllm" and hasattr(obj, "llm_engine")


def _version() -> str | None:
    try:
        import vllm

        return str(vllm.__version__)
    except Exception:  # a broken install still has an engine object to describe
        return None


def _class_name(obj: Any) -> str:
    """The class a user would recognise: vLLM wraps tokenizers in a class made on the fly."""
    return next((c.__name__ for c in type(obj).__mro__ if "<locals>" not in c.__qualname__), type(obj).__name__)


def _runs_here(llm: Any) -> bool:
    """Whether the engine core runs in this process (vLLM's in-process client)."""
    return type(getattr(llm.llm_engine, "engine_core", None)).__name__ == "InprocClient"


def _in_process_worker(llm: Any) -> Any | None:
    """The driver worker when the engine core runs in this process, else None."""
    core = getattr(getattr(llm.llm_engine, "engine_core", None), "engine_core", None)
    executor = getattr(core, "model_executor", None)
    wrapper = getattr(executor, "driver_worker", None)
    return getattr(wrapper, "worker", None)


def _remote_reports(llm: Any, options: dict[str, Any], worker_report: Report) -> list[bytes]:
    """Each worker's report through collective_rpc: by method name when the nbinspect
    extension is mixed into the workers, else as a function (which crosses a process
    boundary only with insecure serialization; in process it always works)."""
    config = llm.llm_engine.vllm_config
    if getattr(config.parallel_config, "worker_extension_cls", "") == EXTENSION:
        return llm.collective_rpc("nbinspect_report", args=(options,))
    if not _runs_here(llm) and os.environ.get("VLLM_ALLOW_INSECURE_SERIALIZATION") != "1":
        raise EngineError(f"the vLLM engine runs in another process and its workers cannot be reached: {_REACH}")
    return llm.collective_rpc(worker_report, args=(options,))


def _global_stats(llm: Any, options: dict[str, Any], worker_report: Report) -> Any:
    """Global Moments of every tensor, merged here from each tensor-parallel rank's share."""

    def ask(step: dict[str, Any]) -> list[Any]:
        return [pickle.loads(r) for r in _remote_reports(llm, {**options, **step}, worker_report)]

    return to_plain(global_moments(ask, options["bins"]))


class EngineReport:
    """What :func:`engine_report` read: the served model's frames and totals (with tensor
    parallelism the whole model's: global shapes, counts and statistics), the engine's facts,
    its components and the sample generation."""

    def __init__(self, name: str, frames: dict[str, pd.DataFrame], totals: dict[str, Any], io: dict[str, Any]):
        self.name, self.frames, self.totals, self.io = name, frames, totals, io


def _engine_facts(llm: Any, report: dict[str, Any], in_process: bool) -> dict[str, Any]:
    config = llm.llm_engine.vllm_config
    model, parallel, cache = config.model_config, config.parallel_config, config.cache_config
    tokenizer = llm.get_tokenizer()
    facts = {
        "engine": f"vLLM {_version()}",
        "vllm_version": _version(),
        "model_path": str(model.model),
        "architecture": (getattr(model, "architectures", None) or [report["model"]])[0],
        "dtype": dtype_name(model.dtype),
        "quantization": model.quantization,
        "max_model_len": model.max_model_len,
        "tensor_parallel_size": parallel.tensor_parallel_size,
        "pipeline_parallel_size": parallel.pipeline_parallel_size,
        "kv_cache_block_size": report["kv_cache_block_size"] or cache.block_size,
        "kv_cache_blocks": report["kv_cache_blocks"] or cache.num_gpu_blocks,
        "kv_cache_bytes": report["kv_cache_bytes"],
        "gpu_memory_utilization": cache.gpu_memory_utilization,
        "kv_cache_memory_bytes": getattr(cache, "kv_cache_memory_bytes", None),
        "tokenizer": _class_name(tokenizer),
        "vocab_size": len(tokenizer),
        "multiprocessing": not in_process,
    }
    assert set(facts) == set(ENGINE_TOTALS), "schema.ENGINE_TOTALS lists the engine facts"
    return facts


def _components(llm: Any, report: dict[str, Any], facts: dict[str, Any], workers: int) -> pd.DataFrame:
    engine = llm.llm_engine
    client = getattr(engine, "engine_core", None)
    in_process = not facts["multiprocessing"]
    here, there = "in process", "engine core process"
    core = getattr(client, "engine_core", None) if in_process else None
    executor = getattr(core, "model_executor", None)
    backend = engine.vllm_config.parallel_config.distributed_executor_backend
    rows = [
        {"component": "LLM", "type": type(llm).__name__, "process": here, "detail": facts["model_path"]},
        {
            "component": "tokenizer",
            "type": facts["tokenizer"],
            "process": here,
            "detail": f"{facts['vocab_size']:,} tokens",
        },
        {
            "component": "engine",
            "type": type(engine).__name__,
            "process": here,
            "detail": f"vLLM {facts['vllm_version']}",
        },
        {"component": "engine core client", "type": type(client).__name__, "process": here, "detail": None},
        {
            "component": "engine core",
            "type": type(core).__name__ if core else "EngineCore",
            "process": here if in_process else there,
            "detail": None,
        },
        {
            "component": "executor",
            "type": type(executor).__name__ if executor else str(backend),
            "process": here if in_process else there,
            "detail": f"backend {backend}",
        },
        {
            "component": "workers",
            "type": report["worker"],
            "process": here if in_process else "worker processes",
            "detail": f"{workers} (tensor parallel {facts['tensor_parallel_size']} × "
            f"pipeline parallel {facts['pipeline_parallel_size']}) on {report['device']}",
        },
        {
            "component": "model runner",
            "type": report["model_runner"],
            "process": here if in_process else "workers",
            "detail": None,
        },
        {
            "component": "model",
            "type": report["model"],
            "process": here if in_process else "workers",
            "detail": f"{report['totals']['total_params']:,} parameters, {facts['dtype']}",
        },
    ]
    return ENGINE_COMPONENTS.build(rows)


def _generate(llm: Any, prompt: str, max_tokens: int) -> dict[str, Any]:
    """One greedy generation: the prompt, the sampling parameters, the text and token counts."""
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
    (result,) = llm.generate([prompt], params, use_tqdm=False)
    sampling = {
        "temperature": params.temperature,
        "max_tokens": params.max_tokens,
        "top_p": params.top_p,
        "n": params.n,
    }
    outputs = [
        {
            "path": f"output.{i}",
            "type": "str",
            "value": o.text,
            "num_tokens": len(o.token_ids),
            "token_ids": list(o.token_ids),
            "finish_reason": o.finish_reason,
        }
        for i, o in enumerate(result.outputs)
    ]
    prompt_tokens = len(result.prompt_token_ids or [])
    return {
        "input": [
            {"path": "prompt", "type": "str", "value": prompt, "num_tokens": prompt_tokens, "sampling_params": sampling}
        ],
        "output": outputs,
    }


def _guard(what: str, step: Callable[[], Any]) -> Any:
    try:
        return step()
    except EngineError:
        raise
    except Exception as exc:  # vLLM internals: one line naming the step, never a deep traceback
        raise EngineError(f"{what} (vLLM {_version()}): {type(exc).__name__}: {first_line(exc)}") from None


def engine_report(
    llm: Any,
    worker_report: Report,
    *,
    stats: bool = True,
    bins: int = 64,
    sample_input: str | None = None,
    max_tokens: int = 8,
) -> EngineReport:
    """Read `llm` (a ``vllm.LLM``): frames of the served model, engine facts and components,
    and with `sample_input` one greedy generation of `max_tokens` tokens. `worker_report`
    builds a worker's frames (:func:`nbinspect.pipeline.worker_report`): it runs where the
    model lives, in this process or in each worker through ``collective_rpc``."""
    if not hasattr(llm.llm_engine, "vllm_config"):
        raise EngineError(f"this vLLM engine ({type(llm.llm_engine).__name__}, vLLM {_version()}) has no vllm_config")
    folder = str(llm.llm_engine.vllm_config.model_config.model)
    options = {"backend": "vllm", "stats": stats, "bins": bins, "folder": folder if os.path.isdir(folder) else None}
    worker = _guard("could not find the worker of the in-process vLLM engine", lambda: _in_process_worker(llm))
    if worker is not None:
        raw = [_guard("could not read the served model in the vLLM worker", lambda: worker_report(worker, options))]
    else:
        reach = "could not reach the vLLM workers through collective_rpc"
        if stats and llm.llm_engine.vllm_config.parallel_config.tensor_parallel_size > 1:
            options["moments"] = _guard(reach, lambda: _global_stats(llm, options, worker_report))
        raw = _guard(reach, lambda: _remote_reports(llm, options, worker_report))
    reports = [pickle.loads(r) for r in raw]
    reports.sort(key=lambda r: r["rank"])
    first = reports[0]
    facts = _guard(
        "could not read the vLLM engine's configuration",
        lambda: _engine_facts(llm, first, _runs_here(llm)),
    )
    totals = {**first["totals"], **facts}
    frames = dict(first["frames"])
    frames["components"] = _guard(
        "could not list the engine's components", lambda: _components(llm, first, facts, len(reports))
    )
    io = (
        _guard("the sample generation failed", lambda: _generate(llm, sample_input, max_tokens))
        if sample_input is not None
        else {}
    )
    name = os.path.basename(folder.rstrip("/")) or folder
    return EngineReport(name, frames, totals, io)
