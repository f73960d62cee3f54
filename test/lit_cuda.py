# Shared by test/lit.cfg.py and test/Unit/lit.cfg.py: is a GPU usable?
import shutil
import subprocess


def cuda_device_visible():
    """True when nvidia-smi lists a GPU (tests that execute on it may run)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and "GPU" in out.stdout
