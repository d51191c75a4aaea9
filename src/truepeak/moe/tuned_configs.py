"""The fused-MoE tuned-config file names vLLM and SGLang look up for a model, layout, device and weight format.

Pure Python. Both frameworks run their Triton fused-MoE kernel with a launch config (BLOCK_SIZE_M/N/K, GROUP_SIZE_M,
warps, stages) read from a JSON file named after the GEMM geometry; a missing file means the untuned default config
("Using default MoE config. Performance might be sub-optimal!"). Printing the names lets a user check whether the file
exists in their installed version before blaming the GPU.

Sources:
    - vLLM ``get_config_file_name`` (``vllm-project/vllm:vllm/model_executor/layers/fused_moe/fused_moe.py``, commit
      000d1458): ``f"E={E},N={N},device_name={device_name}{dtype_selector}{block_shape_selector}.json"`` with
      ``device_name = current_platform.get_device_name().replace(" ", "_")``, ``dtype_selector = ",dtype={dtype}"``
      when a quantised dtype is set, and ``block_shape_selector = f",block_shape={block_shape}".replace(" ", "")``
      (so ``block_shape=[128,128]``, no space). ``E, _, N = w2_shape``: E is the experts on this rank and N the
      expert intermediate size on this rank (I_e / TP; ``shard_intermediate_size // 2`` in
      ``benchmarks/kernels/benchmark_moe.py``). Files live in ``.../fused_moe/configs/``.
    - SGLang ``get_config_file_name`` (``sgl-project/sglang:python/sglang/srt/layers/moe/fused_moe_triton/
      fused_moe_triton_config.py``): the same pattern, but ``block_shape`` is printed as a Python list,
      ``block_shape=[128, 128]`` (with a space), optional ``,per_channel_quant=True``, and files live in
      ``configs/triton_<version>/``. SGLang fuses the shared expert into the grouped GEMM as one more expert (E + 1)
      for DeepSeek-V3/R1, GLM-4.x MoE, GLM-5 (GlmMoeDsa) and Llama-4 unless ``--disable-shared-experts-fusion``
      (``sgl-project/sglang:benchmark/kernels/fused_moe_triton/common_utils.py``; example
      ``E=257,N=128,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8,block_shape=[128, 128].json``).
    - dtype strings (vLLM ``_get_config_dtype_str``, ``vllm/model_executor/layers/fused_moe/config.py``): fp8 weights
      and activations ``fp8_w8a8``; ``int8_w8a8``, ``int8_w8a16``, ``int4_w4a16``; MXFP4 ``mxfp4_w4a4``; bf16/fp16
      none. NVFP4 MoE runs on CUTLASS / FlashInfer / TRT-LLM kernels in both frameworks, which take no such file.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Families whose shared expert SGLang fuses into the routed grouped GEMM as expert E+1 (SGLang ``common_utils.py``).
SGLANG_FUSED_SHARED = ("deepseek_v3", "kimi_k2", "glm4_moe", "glm_moe_dsa", "llama4")


@dataclass(frozen=True)
class TunedConfigNames:
    """File names for one (model, layout, device, weight format).

    Attributes:
        vllm: vLLM's file name, or None when vLLM's Triton fused-MoE path does not serve this weight format.
        sglang: SGLang's (shared expert fused as E+1 where SGLang does that), or None as for vLLM.
        experts_per_rank: E in the name (routed experts on one GPU: E / ep).
        n_per_rank: N in the name (I_e / moe_tp).
        dtype: the dtype selector (``"fp8_w8a8"``) or None.
        block_shape: ``(block_n, block_k)`` of block-quantised weights, or None.
        note: what the user should know (e.g. why there is no file for nvfp4).
    """

    vllm: str | None
    sglang: str | None
    experts_per_rank: int
    n_per_rank: int
    dtype: str | None
    block_shape: tuple[int, int] | None
    note: str = ""

    def to_dict(self) -> dict:
        return {"vllm": self.vllm, "sglang": self.sglang, "E": self.experts_per_rank, "N": self.n_per_rank,
                "dtype": self.dtype, "block_shape": list(self.block_shape) if self.block_shape else None,
                "note": self.note}


def device_token(device_name: str) -> str:
    """The device part of the names: torch's device name with spaces replaced by underscores
    (``"NVIDIA RTX PRO 6000 Blackwell Workstation Edition"`` -> ``"NVIDIA_RTX_PRO_6000_Blackwell_Workstation_Edition"``)."""
    return str(device_name).replace(" ", "_")


def dtype_selector(weights: str, activations: str) -> tuple[str | None, str]:
    """``(dtype, note)`` for format names (canonical, :mod:`truepeak.formats`).

    fp8 weights with fp8 activations -> ``fp8_w8a8``; fp8 weights with 16-bit activations -> ``fp8_w8a8`` too (both
    frameworks quantise activations on the fly in the Triton fp8 path); int8 -> ``int8_w8a8`` / ``int8_w8a16``; mxfp4
    -> ``mxfp4_w4a4``; bf16/fp16 -> None; nvfp4 -> None with a note (no Triton fused-MoE file)."""
    w = weights.lower()
    if w.startswith("fp8") or w == "mxfp8":
        return "fp8_w8a8", ""
    if w == "int8":
        return ("int8_w8a8" if activations == "int8" else "int8_w8a16"), ""
    if w == "mxfp4":
        return "mxfp4_w4a4", "SGLang has no mxfp4 dtype selector; its name is shown without one"
    if w == "nvfp4":
        return None, ("nvfp4 MoE runs on CUTLASS / FlashInfer / TRT-LLM kernels in vLLM and SGLang, which read no "
                      "Triton tuned-config file; the names below are those of the bf16 Triton path")
    return None, ""


def tuned_config_names(model, layout, device_name: str, weights: str, activations: str) -> TunedConfigNames:
    """The vLLM and SGLang fused-MoE config file names for ``model`` (:class:`~truepeak.moe.config.MoEModel`) on
    ``layout`` (:class:`~truepeak.moe.layout.Layout`), a device named ``device_name`` (as torch reports it) and the
    weight/activation formats (canonical names).

    E = routed experts per rank (E / ep); N = I_e / moe_tp; block_shape from the model's ``weight_block_size`` when
    the weights are fp8 (DeepSeek-V3's [128, 128]). SGLang: E + 1 when it fuses the shared expert (only without EP:
    with EP the shared expert is not fused into the per-rank experts).
    """
    e = model.experts
    e_rank = e.num_experts // layout.ep
    n_rank = e.intermediate_size // layout.moe_tp
    dtype, note = dtype_selector(weights, activations)
    block = None
    wbs = getattr(model, "weight_block_size", None)
    if dtype == "fp8_w8a8" and wbs and len(wbs) == 2:
        block = (int(wbs[0]), int(wbs[1]))
    dev = device_token(device_name)
    sel = f",dtype={dtype}" if dtype and dtype != "mxfp4_w4a4" else ""
    vllm_dtype = f",dtype={dtype}" if dtype else ""
    vllm = f"E={e_rank},N={n_rank},device_name={dev}{vllm_dtype}"
    vllm += f",block_shape=[{block[0]},{block[1]}]" if block else ""
    fused = model.family in SGLANG_FUSED_SHARED and e.num_shared > 0 and layout.ep == 1
    e_sgl = e_rank + (e.num_shared if fused else 0)
    sglang = f"E={e_sgl},N={n_rank},device_name={dev}{sel}"
    sglang += f",block_shape=[{block[0]}, {block[1]}]" if block else ""
    if fused:
        extra = f"SGLang fuses the shared expert as expert {e_rank + 1} (E={e_sgl}; off with " \
                f"--disable-shared-experts-fusion)"
        note = f"{note}; {extra}" if note else extra
    return TunedConfigNames(vllm + ".json", sglang + ".json", e_rank, n_rank, dtype, block, note)


__all__ = ["SGLANG_FUSED_SHARED", "TunedConfigNames", "device_token", "dtype_selector", "tuned_config_names"]
