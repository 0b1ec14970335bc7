"""Convert the packaged all-MiniLM-L6-v2 weights to ONNX once, and find the converted file.

The fp32 graph is built from the weights by propdex/embed/minilm_graph.py (numpy and onnx
only, no torch). It holds BERT plus sentence-transformers' mean pooling, so the runtime only
tokenizes and L2-normalises. The int8 graph (the default for documents) is the fp32 one
through ``onnxruntime.quantization.quantize_dynamic``: matrix weights quantized per output
column, activations quantized at run time, products on the integer kernels.

Both are built in the process that embeds, once per user. Concurrent first use is safe: one
process converts under a file lock, into a temporary file renamed into place; the others wait
for the lock and find the file.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Literal

Precision = Literal["fp32", "int8"]

# Bump when minilm_graph.py changes the produced graph: old files are then ignored.
EXPORT_RECIPE = "5"
# Bump when the quantization below changes the int8 vectors; also part of their cache keys
# and of the pipeline fingerprint, so int8 indexes re-embed. w7: 7-bit weights (see
# quantize_minilm).
INT8_RECIPE = "qdyn-w7"
# How int8 document vectors are run: each text (each window of a long text) alone. Dynamic
# quantization scales a run's activations per tensor, so in a batch a text's vector would
# depend on the texts beside it (cosine 0.9925 to its vector alone, enough to reorder
# results). Part of the int8 vectors' cache keys and of the pipeline fingerprint.
INT8_RUNS = "per-text"


def default_onnx_dir() -> Path:
    """$XDG_CACHE_HOME/propdex/onnx, else ~/.cache/propdex/onnx: one conversion per user."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(base) / "propdex" / "onnx"


def onnx_model_path(folder: Path, precision: Precision) -> Path:
    """Where the converted model lives; the name changes with the packaged weights and the
    export recipe, so an upgrade of either converts again instead of using a stale graph."""
    from propdex.embed.minilm_weights import weights_tag

    recipe = EXPORT_RECIPE if precision == "fp32" else f"{EXPORT_RECIPE}:{INT8_RECIPE}"
    tag = hashlib.sha256(f"{weights_tag()}:{recipe}".encode()).hexdigest()[:10]
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
    """Build the fp32 graph, or quantize it to int8, into ``target`` atomically (temp +
    rename). The int8 graph is quantized from the fp32 file of the same folder, which
    queries need anyway."""
    try:
        import onnx  # noqa: F401  (the graph is built with its helpers)
    except ImportError as exc:
        raise ImportError(
            "converting MiniLM to ONNX needs the 'local' extra: pip install 'propdex[local]' "
            f"(missing: {exc.name})"
        ) from exc
    from propdex.embed.minilm_graph import write_minilm_graph

    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".convert-") as tmp:
        built = Path(tmp) / f"{precision}.onnx"
        if precision == "fp32":
            write_minilm_graph(built)
        else:
            quantize_minilm(ensure_onnx_model(target.parent, "fp32"), built)
        os.replace(built, target)


def quantize_minilm(fp32_model: Path, target: Path) -> None:
    """Dynamic int8 quantization of the matrix products (MatMul and the fused Attention),
    weights per output column.

    ``reduce_range`` keeps weights in [-64, 64]: on x86 CPUs without VNNI (AVX2 only: many
    AMD EPYC and older Intel parts) MatMulInteger's uint8 x int8 kernel (VPMADDUBSW) adds
    pairs of products in int16 and saturates; 2 x 255 x 127 overflows 32767, 2 x 255 x 64
    does not. On VNNI CPUs the reduced range costs nothing measurable (bench/RESULTS.md).
    """
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.quant_utils import add_pre_process_metadata

    model = onnx.load(str(fp32_model))
    # The graph is built fused and typed: quant_pre_process (shape inference, seconds of CPU)
    # gives the same int8 model, so it is marked as pre-processed instead of run (the
    # quantizer warns on stderr otherwise).
    add_pre_process_metadata(model)
    quantize_dynamic(
        model, str(target), weight_type=QuantType.QInt8, per_channel=True, reduce_range=True,
        op_types_to_quantize=["MatMul", "Attention"],
        # The fused contrib ops carry no type information the quantizer can read: their
        # outputs are float.
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
