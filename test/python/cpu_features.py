"""Which oneDNN kernels this CPU has, for tests whose expected path (oneDNN
or the runtime's widening fallback) depends on it. The development and CI
machines are a mix of Intel Xeons (AVX-512 with BF16 and FP16, AMX) and AMD
EPYCs (Zen 4: AVX512-BF16, no FP16)."""


def _flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            return set(f.read().split())
    except OSError:
        return set()


def cpu_has_bf16() -> bool:
    """Whether oneDNN has optimized bf16 kernels here (AVX512-BF16 or AMX);
    elsewhere (AVX2-only machines) oneDNN 3 may only offer its reference
    kernel, which the runtime refuses, and oneDNN 2 runs M > 1."""
    return bool(_flags() & {"avx512_bf16", "amx_bf16"})


def cpu_has_f16() -> bool:
    """Whether oneDNN 3 has f16 matmul kernels here (AVX512-FP16 or
    AMX-FP16); elsewhere the runtime widens f16 to f32 for OpenBLAS."""
    return bool(_flags() & {"avx512_fp16", "amx_fp16"})


def cpu_runs_few_row_kernels() -> bool:
    """Whether f16 GEMMs of 1 to 4 rows run on linfuse's own kernels here
    (FewRowGemm.cpp: AVX2, FMA and F16C) rather than oneDNN 3 or the
    widening fallback."""
    return {"avx2", "fma", "f16c"} <= _flags()
