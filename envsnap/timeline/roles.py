"""Which packages matter first for a GPU job: the driver, CUDA, NCCL, the kernel, torch.

One table for system (dpkg, rpm) and Python package names alike; a timeline says the role
beside the change ("system: NCCL"), so an NCCL upgrade is not lost among 200 library bumps.
"""
from __future__ import annotations

import re

ROLES = (
    ("NVIDIA driver", re.compile(r"^(nvidia-(driver|kernel|dkms|utils|compute-utils|fabricmanager)"
                                 r"|libnvidia-|kmod-nvidia|nvidia-open|xserver-xorg-video-nvidia)")),
    ("NCCL", re.compile(r"(^|-)(lib)?nccl")),
    ("CUDA", re.compile(r"^(cuda|libcuda|libcublas|libcudnn|libcufft|libcurand|libcusparse|"
                        r"libnvjitlink|nvidia-cuda|nvidia-cublas|nvidia-cudnn|libnpp)")),
    ("kernel", re.compile(r"^(linux-(image|headers|modules)|kernel(-core|-modules)?$)")),
    ("torch", re.compile(r"^(torch|triton|pytorch)")),
)


def package_role(name: str) -> str | None:
    lowered = name.lower()
    for role, pattern in ROLES:
        if pattern.search(lowered):
            return role
    return None
