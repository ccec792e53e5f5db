"""Batch-invariant dynamic INT8 for decoder reranker graphs: per-row activation quantization.

`tide quantize --int8` (src/quantize) quantizes each MatMul's activations with ONE scale for the
whole batch tensor (ONNX Runtime's DynamicQuantizeMatMul / DynamicQuantizeLinear), so a row's
quantization, and its score, depend on the other rows of its batch and on the padding: measured on
qwen3-tiny through `tide serve`, a pair alone and the same pair batched beside a short and a long
document differ by ~1e-3 in score. tide promises a pair the same score in any batch, so the decoder
export (`tools/export_model.py --int8`) quantizes every row (token) on its own:

  A [.., K] float                        (one chain per activation, shared by the MatMuls reading it:
  s = max(max|A[row, :]|, 1e-12) / 127     q/k/v, gate/up)
  q = uint8(clip(round(A / s), -127, 127) + 128)
  Y = float(MatMulInteger(q, Wq, a_zero_point = 128)) * s * w_scale

with int8 weights, symmetric per output column (w_scale[n] = max|W[:, n]| / 127). Integer
products are exact, and every float step is per row, so a row's result is bitwise the same in any
batch. uint8 activations with int8 weights is the u8s8 form ONNX Runtime's MLAS kernels run fastest;
on a CPU without VNNI, u8s8 kernels may saturate int16 sums (see src/quantize's reduce_range).

Contract:
  - `quantize_per_row(model)` rewrites, in place, every default-domain MatMul whose second input is
    a float32 [K, N] initializer with N > 1 (the 1-wide score head stays FP32); returns the number
    rewritten. Raises ValueError when nothing qualifies or the model is already quantized.
  - Works on the fused and the unfused decoder graphs (decoder_fused.py); opset >= 13.
"""

from __future__ import annotations

from typing import Dict, List

import numpy as np

_QUANTIZED_OPS = ("MatMulInteger", "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "DynamicQuantizeLinear")


def quantize_per_row(model) -> int:
    import onnx
    from onnx import helper, numpy_helper

    g = model.graph
    if any(n.op_type in _QUANTIZED_OPS for n in g.node):
        raise ValueError("the model is already quantized")
    inits = {t.name: t for t in g.initializer}
    readers: Dict[str, int] = {}
    for n in g.node:
        for i in n.input:
            readers[i] = readers.get(i, 0) + 1

    def weight(node):
        if node.op_type != "MatMul" or node.domain not in ("", "ai.onnx") or len(node.input) != 2:
            return None
        t = inits.get(node.input[1])
        if t is None or t.data_type != onnx.TensorProto.FLOAT or len(t.dims) != 2 or t.dims[1] <= 1:
            return None
        return t

    chains: Dict[str, Dict[str, str]] = {}  # activation -> names of its quantized form and scale
    new_inits: List = []
    dead_inits = set()
    out_nodes = []
    count = 0
    uid = [0]

    def name(base: str) -> str:
        uid[0] += 1
        return f"{base}_rowq{uid[0]}"

    consts = {
        "eps": numpy_helper.from_array(np.array(1e-12, dtype=np.float32), "rowq_eps"),
        "qmax": numpy_helper.from_array(np.array(127.0, dtype=np.float32), "rowq_127"),
        "qmin": numpy_helper.from_array(np.array(-127.0, dtype=np.float32), "rowq_minus_127"),
        "offset": numpy_helper.from_array(np.array(128.0, dtype=np.float32), "rowq_128"),
        "zp": numpy_helper.from_array(np.array(128, dtype=np.uint8), "rowq_zero_point"),
    }

    def chain(activation: str) -> Dict[str, str]:
        if activation in chains:
            return chains[activation]
        base = activation.replace("/", "_").strip("_") or "a"
        absv, amax, floor, scale, div, rnd, clip, shifted, q = (name(f"{base}_{s}") for s in (
            "abs", "max", "floor", "scale", "div", "round", "clip", "shift", "u8"))
        out_nodes.extend([
            helper.make_node("Abs", [activation], [absv], name=absv),
            helper.make_node("ReduceMax", [absv], [amax], name=amax, axes=[-1], keepdims=1),
            helper.make_node("Max", [amax, consts["eps"].name], [floor], name=floor),
            helper.make_node("Div", [floor, consts["qmax"].name], [scale], name=scale),
            helper.make_node("Div", [activation, scale], [div], name=div),
            helper.make_node("Round", [div], [rnd], name=rnd),
            helper.make_node("Clip", [rnd, consts["qmin"].name, consts["qmax"].name], [clip], name=clip),
            helper.make_node("Add", [clip, consts["offset"].name], [shifted], name=shifted),
            helper.make_node("Cast", [shifted], [q], name=q, to=onnx.TensorProto.UINT8),
        ])
        chains[activation] = {"q": q, "scale": scale}
        return chains[activation]

    for node in g.node:
        t = weight(node)
        if t is None:
            out_nodes.append(node)
            continue
        w = numpy_helper.to_array(t).astype(np.float32)
        w_scale = np.maximum(np.abs(w).max(axis=0), 1e-12) / 127.0
        wq = np.clip(np.round(w / w_scale), -127, 127).astype(np.int8)
        base = (node.name or node.output[0]).replace("/", "_").strip("_")
        wq_name, ws_name = f"{t.name}_int8", f"{t.name}_scale"
        new_inits += [numpy_helper.from_array(wq, wq_name),
                      numpy_helper.from_array(w_scale.astype(np.float32), ws_name)]
        if readers.get(t.name, 0) == 1:
            dead_inits.add(t.name)
        c = chain(node.input[0])
        acc, accf, scaled = name(f"{base}_i32"), name(f"{base}_f32"), name(f"{base}_rowscaled")
        out_nodes.extend([
            helper.make_node("MatMulInteger", [c["q"], wq_name, consts["zp"].name], [acc], name=acc),
            helper.make_node("Cast", [acc], [accf], name=accf, to=onnx.TensorProto.FLOAT),
            helper.make_node("Mul", [accf, c["scale"]], [scaled], name=scaled),
            helper.make_node("Mul", [scaled, ws_name], [node.output[0]], name=name(f"{base}_out")),
        ])
        count += 1
    if count == 0:
        raise ValueError("no MatMul with a float32 [K, N > 1] weight initializer to quantize")
    # Chains are emitted at their first reader; their input is produced earlier, so order holds.
    del g.node[:]
    g.node.extend(out_nodes)
    kept = [t for t in g.initializer if t.name not in dead_inits]
    del g.initializer[:]
    g.initializer.extend(kept + new_inits + list(consts.values()))
    return count
