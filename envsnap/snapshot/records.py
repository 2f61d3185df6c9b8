"""The snapshot's records as types: what mypy knows of a document that schema.py has checked.

schema.py is the one runtime description; these TypedDicts say the same for the type checker,
and tests/unit/snapshot/test_records.py walks both and fails on any field, required key or
field type that one has and the other lacks. document.validate() is the one place that
turns a checked mapping into a `Snapshot` (a cast: nothing is copied or converted).

Why TypedDicts, not dataclasses built at load: the document stays the plain mapping it is on
disk, in digests, in the diff's tree walk, in masking and in the YAML dump (each would need
objects turned back into mappings), and typing it costs nothing at run time (a cast).
bench/bench_records.py measures the alternative, a slotted dataclass per record built from
the checked mapping: a multiple of the schema check itself, paid by every load (its figures:
bench/ledger.tsv).

How the schema's words read here:
- a field "X or null" (the agent's word for "could not be read") is `Optional[X]`;
- a record's fields are all optional unless schema.py requires them: `total=False`, with a
  required base class where it requires some (`SnapshotRequired`, `BenchRequired`);
- `{"error": why}` in place of something that could not be read is `Failed`; a repo or a
  record of the agent may be one, which is why each has its own optional `error`;
- a record's `rest` (the fields a newer agent may add) has no type: it stays readable by
  key only through code that treats the record as a mapping.

No `from __future__ import annotations` on purpose: the annotations are evaluated at import,
so typing.get_type_hints reads them on every supported Python. That costs about 5 ms (typing
builds each TypedDict and Union), more than `envsnap diff` should pay for types only mypy
reads: the rest of envsnap imports this module under `if TYPE_CHECKING:` only.
"""
from typing import Any, Literal, Optional, TypedDict, Union


class Failed(TypedDict):
    """What could not be read, and why (the whole value, in place of a record or a reading)."""

    error: str


# ---- system ---------------------------------------------------------------------------------
LimitValue = Union[int, None, Literal["unlimited"]]


class Limit(TypedDict, total=False):
    soft: LimitValue
    hard: LimitValue


class Kernel(TypedDict, total=False):
    release: Optional[str]
    version: Optional[str]
    machine: Optional[str]


class Cpu(TypedDict, total=False):
    model: Optional[str]
    logical_cpus: Optional[int]
    physical_cores: Optional[int]
    sockets: Optional[int]
    online: Optional[str]
    smt: Optional[str]
    vendor_id: Optional[str]
    family: Optional[str]
    model_id: Optional[str]
    stepping: Optional[str]
    flags: Optional[str]
    address_sizes: Optional[str]
    op_modes: Optional[str]
    byte_order: Optional[str]
    caches: dict[str, Optional[str]]            # lscpu's name (L1d) -> its size line
    vulnerabilities: dict[str, Optional[str]]   # lscpu's name -> the kernel's word


class Memory(TypedDict, total=False):
    total_kib: Optional[int]
    swap_total_kib: Optional[int]
    hugepages_total: Optional[int]
    hugepage_size_kib: Optional[int]


class NumaNode(TypedDict, total=False):
    cpulist: Optional[str]
    mem_total_kib: Optional[int]


class Iommu(TypedDict, total=False):
    groups: Optional[int]
    cmdline: dict[str, Optional[str]]


class Toolchain(TypedDict, total=False):
    """What collect_env reports of the compilers, CMake and libc, as it words them."""

    gcc: Optional[str]
    clang: Optional[str]
    cmake: Optional[str]
    libc: Optional[str]


class System(TypedDict, total=False):
    hostname: Optional[str]
    boot_id: Optional[str]
    cmdline: Optional[str]
    kernel: Kernel
    cpu: Cpu
    governors: dict[str, int]
    memory: Memory
    numa: dict[str, NumaNode]
    iommu: Iommu
    limits: dict[str, Limit]
    os_release: dict[str, Optional[str]]
    transparent_hugepage: dict[str, Optional[str]]
    toolchain: Toolchain


# ---- nvidia ---------------------------------------------------------------------------------
# A GPU reading: its value, null (not supported), or {"error": why} (the read failed).
IntReading = Union[int, None, Failed]
NumReading = Union[float, None, Failed]
StrReading = Union[str, None, Failed]
StringsReading = Union[list[str], Failed]


class Gpu(TypedDict, total=False):
    """One GPU's configuration, keyed by PCI bus in nvidia.gpus."""

    index: IntReading
    clock_app_graphics_mhz: IntReading
    clock_app_mem_mhz: IntReading
    clock_default_app_graphics_mhz: IntReading
    clock_default_app_mem_mhz: IntReading
    clock_max_graphics_mhz: IntReading
    clock_max_mem_mhz: IntReading
    clock_max_sm_mhz: IntReading
    clock_max_video_mhz: IntReading
    memory_total_mib: IntReading
    nvlink_active: IntReading
    pcie_gen_current: IntReading
    pcie_gen_gpu_max: IntReading
    pcie_gen_max: IntReading
    pcie_width_current: IntReading
    pcie_width_max: IntReading
    temp_shutdown_c: IntReading
    temp_slowdown_c: IntReading
    numa_node: IntReading
    power_default_limit_w: NumReading
    power_enforced_limit_w: NumReading
    power_limit_w: NumReading
    power_max_limit_w: NumReading
    power_min_limit_w: NumReading
    name: StrReading
    uuid: StrReading
    architecture: StrReading
    compute_capability: StrReading
    compute_mode: StrReading
    cpu_affinity: StrReading
    numa_affinity: StrReading
    ecc_mode_current: StrReading
    ecc_mode_pending: StrReading
    mig_mode_current: StrReading
    mig_mode_pending: StrReading
    persistence_mode: StrReading
    inforom_image: StrReading
    vbios: StrReading
    clock_event_reasons_supported_mask: StrReading
    clock_event_reasons_supported: StringsReading
    error: Optional[str]


class GpuReadings(TypedDict, total=False):
    """One GPU's volatile readings (clocks, temperatures, use)."""

    clock_graphics_mhz: IntReading
    clock_mem_mhz: IntReading
    clock_sm_mhz: IntReading
    ecc_corrected_aggregate: IntReading
    ecc_corrected_volatile: IntReading
    ecc_uncorrected_aggregate: IntReading
    ecc_uncorrected_volatile: IntReading
    memory_used_mib: IntReading
    pcie_replay_count: IntReading
    temperature_c: IntReading
    utilization_gpu_pct: IntReading
    utilization_mem_pct: IntReading
    fan_pct: IntReading
    energy_j: NumReading
    power_draw_w: NumReading
    clock_event_reasons_mask: StrReading
    pstate: StrReading
    clock_event_reasons: StringsReading
    remapped_rows: Union[dict[str, Optional[int]], None, Failed]


class ModuleFile(TypedDict, total=False):
    path: Optional[str]
    size: Optional[int]
    mtime: Optional[str]


class KernelModule(TypedDict, total=False):
    """The NVIDIA kernel module: loaded, on disk, built how."""

    version: Optional[str]
    flavor: Optional[str]
    gcc: Optional[str]
    gcc_line: Optional[str]
    nvrm_line: Optional[str]
    srcversion: Optional[str]
    arch: Optional[str]
    build: Optional[str]
    build_date: Optional[str]
    build_type: Optional[str]
    description: Optional[str]
    file: Optional[ModuleFile]
    file_matches_loaded: Optional[bool]
    loaded: dict[str, Optional[str]]
    modinfo: Optional[dict[str, Optional[str]]]
    params: dict[str, Optional[str]]


class UserspaceLibrary(TypedDict, total=False):
    path: Optional[str]
    version: Optional[str]


class Nvidia(TypedDict, total=False):
    present: Optional[bool]
    source: Optional[str]
    reason: Optional[str]
    driver: Optional[str]
    cuda_driver: Optional[str]
    nvml_version: Optional[str]
    gpu_count: Optional[int]
    gpus: dict[str, Gpu]
    topology: dict[str, dict[str, Optional[str]]]
    kernel_module: Optional[KernelModule]
    userspace_library: Optional[UserspaceLibrary]


# ---- cuda_nccl ------------------------------------------------------------------------------
class VersionSource(TypedDict, total=False):
    """A version and where it was read."""

    version: Optional[str]
    source: Optional[str]
    found_by: Optional[str]
    reason: Optional[str]
    path: Optional[str]
    error: Optional[str]


class Cudnn(TypedDict, total=False):
    headers: dict[str, Optional[str]]
    wheels: dict[str, VersionSource]
    libraries: dict[str, Optional[str]]       # library path -> version
    torch: Optional[VersionSource]            # the libcudnn torch would load


class Nccl(TypedDict, total=False):
    torch: Optional[VersionSource]
    wheels: dict[str, VersionSource]
    libraries: dict[str, VersionSource]


class TorchBuild(TypedDict, total=False):
    version: Optional[str]
    cuda: Optional[str]
    hip: Optional[str]
    debug: Optional[bool]
    git_version: Optional[str]
    path: Optional[str]
    source: Optional[str]
    reason: Optional[str]


class Rocm(TypedDict, total=False):
    """AMD's stack as a pasted report states it (torch's and vLLM's collect_env, SGLang's
    check_env); a capture does not record it yet."""

    version: Optional[str]                 # `ROCM Version` (vLLM), the installed ROCm
    hip_runtime: Optional[str]             # `HIP runtime version` (torch)
    miopen: Optional[str]                  # `MIOpen runtime version` (torch)
    driver: Optional[str]                  # `ROCM Driver Version` (SGLang)
    hipcc: Optional[str]                   # `HIPCC` (SGLang): the compiler's version line
    gpus: dict[str, Optional[str]]         # GPU0 -> its name and gfx target, as stated
    topology: dict[str, dict[str, Optional[str]]]   # rocm-smi's link types (XGMI, PCIE)


class CudaNccl(TypedDict, total=False):
    cuda_toolkit: Optional[VersionSource]
    cuda_toolkits_installed: dict[str, Optional[str]]
    cudnn: Cudnn
    nccl: Nccl
    nvidia_wheels: dict[str, Optional[str]]
    torch: Optional[TorchBuild]
    rocm: Rocm


# ---- python_env -----------------------------------------------------------------------------
class CustomizeFile(TypedDict, total=False):
    """sitecustomize/usercustomize: the file as found."""

    path: Optional[str]
    real_path: Optional[str]     # where a link (Debian's /usr/lib/python3.X one) leads
    content: Optional[str]
    sha256: Optional[str]
    size: Optional[int]
    imported: Optional[bool]
    redacted: Optional[bool]
    truncated: Optional[bool]
    error: Optional[str]


class ShadowedCustomize(CustomizeFile, total=False):
    """A sitecustomize.py/usercustomize.py on sys.path that never runs: an earlier one wins."""

    module: Optional[str]             # sitecustomize or usercustomize
    shadowed_by: Optional[str]        # the file imported in its place
    shadowed_by_real: Optional[str]   # that one's real path


class UserSite(TypedDict, total=False):
    """Whether the user site (and so usercustomize) is on: a venv turns it off."""

    enabled: Optional[bool]
    path: Optional[str]


class Interpreter(TypedDict, total=False):
    executable: Optional[str]
    executable_real: Optional[str]
    version: Optional[str]
    implementation: Optional[str]
    build: Optional[str]
    prefix: Optional[str]
    base_prefix: Optional[str]
    venv: Optional[bool]
    flags: dict[str, Optional[bool]]


class StartupPth(TypedDict, total=False):
    code_lines: list[str]
    sha256: Optional[str]
    error: Optional[str]


class CondaPackage(TypedDict, total=False):
    """A package as `conda list` gives it; only an import records these (imports/conda.py)."""

    version: Optional[str]
    build: Optional[str]
    channel: Optional[str]


class PythonEnv(TypedDict, total=False):
    interpreter: Interpreter
    packages: dict[str, Optional[str]]        # distribution -> version
    outside_site: list[str]                   # of those, found outside the site folders
    editable: dict[str, Optional[str]]
    conda: dict[str, CondaPackage]            # conda's package name -> its record
    direct_urls: dict[str, Any]               # each distribution's direct_url.json, free-form
    shadowed: dict[str, Any]
    customize: dict[str, Optional[CustomizeFile]]
    customize_shadowed: dict[str, ShadowedCustomize]   # by path
    user_site: UserSite
    startup_pth: dict[str, StartupPth]
    site_dirs: list[str]
    sys_path: list[str]


# ---- env ------------------------------------------------------------------------------------
class Process(TypedDict, total=False):
    """A matched process (a server, a torchrun worker), keyed by pid."""

    cmdline: list[str]
    exe: Optional[str]
    cwd: Optional[str]
    ppid: Optional[int]
    matched: Optional[str]
    start_since_boot_s: Optional[float]
    start_epoch: Optional[float]
    env: dict[str, Optional[str]]
    limits: dict[str, Limit]
    error: Optional[str]
    role: Optional[str]


class Env(TypedDict, total=False):
    shell: dict[str, Optional[str]]
    processes: dict[str, Process]
    processes_omitted: Optional[int]
    proc_patterns: list[str]
    env_prefixes: list[str]


# ---- git ------------------------------------------------------------------------------------
class PatchFile(TypedDict, total=False):
    """One file's part of a whole patch, measured past the cap."""

    bytes: Optional[int]
    sha256: Optional[str]


class Blob(TypedDict, total=False):
    """A text (a patch) with its size and digest; text may be truncated."""

    bytes: Optional[int]
    sha256: Optional[str]
    truncated: Optional[bool]
    text: Optional[str]
    error: Optional[str]
    files: dict[str, PatchFile]
    files_total: Optional[int]


class Commit(TypedDict, total=False):
    sha: Optional[str]
    parents: list[str]
    time: Optional[int]
    author: Optional[str]
    subject: Optional[str]
    files: list[str]
    shallow_boundary: Optional[bool]


class ReflogEntry(TypedDict, total=False):
    selector: Optional[str]
    old: Optional[str]
    new: Optional[str]
    time: Optional[int]
    tz: Optional[str]
    message: Optional[str]


class Submodule(TypedDict, total=False):
    """recorded: the commit the superproject's index holds; checked_out: the submodule's HEAD
    (null: not checked out)."""

    recorded: Optional[str]
    checked_out: Optional[str]
    initialized: Optional[bool]
    modified: Optional[bool]
    untracked: Optional[bool]


class InProgress(TypedDict, total=False):
    """A rebase, am, merge, cherry-pick, revert or bisect stopped half-way."""

    operation: Optional[str]
    conflicted: list[str]
    onto: Optional[str]
    branch: Optional[str]
    merge_head: Optional[str]
    cherry_pick_head: Optional[str]
    revert_head: Optional[str]


class Stash(TypedDict, total=False):
    sha: Optional[str]
    base: Optional[str]
    message: Optional[str]
    time: Optional[int]
    has_untracked: Optional[bool]
    patch: Optional[Blob]


class Uncommitted(TypedDict, total=False):
    dirty: Optional[bool]
    digest: Optional[str]
    tracked: dict[str, Optional[str]]          # path -> status
    untracked: dict[str, object]               # path -> the agent's file facts, free-form
    untracked_count: Optional[int]
    untracked_truncated: Optional[bool]
    patch: Optional[Blob]
    staged: Optional[Blob]


class HeldBy(TypedDict, total=False):
    """The envsnap restore, bisect or explain that held the checkout's lock at capture."""

    controller: Optional[str]
    pid: Optional[int]
    command: Optional[str]
    since: Optional[str]


class Repo(TypedDict, total=False):
    """One repository, keyed by its path; only `error` when it could not be read."""

    head: Optional[str]
    branch: Optional[str]
    upstream: Optional[str]
    ahead: Optional[int]
    behind: Optional[int]
    detached: Optional[bool]
    detached_at: Optional[str]
    detached_at_name: Optional[str]
    detached_from: Optional[str]
    detached_from_name: Optional[str]
    shallow: Optional[bool]
    shallow_boundary: list[str]
    realpath: Optional[str]
    toplevel: Optional[str]
    given_path: Optional[str]
    held_by: Optional[HeldBy]
    remotes: dict[str, Optional[str]]
    history: list[Commit]
    history_limit: Optional[int]
    history_complete: Optional[bool]
    reflog: list[ReflogEntry]
    reflog_truncated: Optional[bool]
    submodules: dict[str, Submodule]
    in_progress: Optional[InProgress]
    stashes: dict[str, Stash]
    stashes_error: Optional[str]       # why `git stash list` could not be read
    uncommitted: Optional[Uncommitted]
    error: Optional[str]


class GitTool(TypedDict, total=False):
    path: Optional[str]
    version: Optional[str]


class Git(TypedDict, total=False):
    git: Optional[GitTool]
    repos: dict[str, Repo]


class Facts(TypedDict, total=False):
    """Configuration by section; a section whose collector failed is {} (all fields optional),
    and a section this version does not know stays a plain mapping."""

    system: System
    nvidia: Nvidia
    cuda_nccl: CudaNccl
    python_env: PythonEnv
    env: Env
    git: Git


# ---- volatile -------------------------------------------------------------------------------
class SystemReadings(TypedDict, total=False):
    uptime_seconds: Optional[float]
    mem_available_kib: Optional[int]
    loadavg: dict[str, Optional[float]]
    numa_mem_total_kib: dict[str, Optional[int]]
    bogomips: Optional[str]                     # lscpu's, measured at boot


class NvidiaReadings(TypedDict, total=False):
    gpus: dict[str, GpuReadings]


class GitReadings(TypedDict, total=False):
    seconds: dict[str, Optional[float]]


class Volatile(TypedDict, total=False):
    system: SystemReadings
    nvidia: NvidiaReadings
    git: GitReadings


# ---- meta -----------------------------------------------------------------------------------
class Agent(TypedDict, total=False):
    """The agent that ran on the host, and its own cost there: start-up (interpreter and
    imports) and the masking pass, in seconds."""

    version: Optional[str]
    pid: Optional[int]
    python: Optional[str]
    python_version: Optional[str]
    startup_seconds: Optional[float]
    masking_seconds: Optional[float]


class CaptureConfig(TypedDict, total=False):
    """The options the capture ran with."""

    repos: list[str]
    procs: list[str]
    hot_paths: list[str]
    python: Optional[str]
    timeout: Optional[float]


class Collector(TypedDict, total=False):
    """A null error: captured; a string: why not."""

    seconds: Optional[float]
    error: Optional[str]


class Signature(TypedDict, total=False):
    """As recorded; snapshot/provenance.py makes it and checks that all three are there
    before trusting it."""

    algorithm: str
    key: str       # the key's id (a digest of it, never the key): tells "another key" apart
    digest: str    # HMAC-SHA256 of provenance.canonical_bytes(document), hex


class ImportSource(TypedDict, total=False):
    """One file an imported snapshot was read from."""

    sha256: Optional[str]
    tool: Optional[str]
    format: Optional[str]
    version: Optional[str]
    lines: Optional[int]


class Imported(TypedDict, total=False):
    """A snapshot read from pasted tool outputs (`envsnap import`): partial."""

    partial: Optional[bool]
    complete: list[str]
    sources: dict[str, ImportSource]


class Meta(TypedDict, total=False):
    label: str
    host: str
    address: Optional[str]
    captured_at: str
    envsnap_version: Optional[str]
    agent: Agent
    config: CaptureConfig
    collectors: dict[str, Collector]
    imported: Imported
    signature: Signature


# ---- bench ----------------------------------------------------------------------------------
class Stats(TypedDict, total=False):
    """A reading's spread over a run's samples."""

    min: Optional[float]
    median: Optional[float]
    max: Optional[float]


class BenchGpuBusy(TypedDict, total=False):
    """Stats over the samples when the GPU was busy; each reading's Stats by its name."""

    samples: Optional[int]
    clock_event_reasons: dict[str, Optional[float]]


class PowerBusy(TypedDict, total=False):
    """Busy phases seen in the driver's buffered power samples: power above threshold_w."""

    phases: Optional[int]
    seconds: Optional[float]
    threshold_w: Optional[float]
    buffered: Optional[int]


class BenchGpu(TypedDict, total=False):
    """One GPU's telemetry while the benchmark ran; each reading's Stats by its name."""

    index: Optional[int]
    name: Optional[str]
    pcie_source: Optional[str]
    samples: Optional[int]
    error: Optional[str]
    clock_event_reasons: dict[str, Optional[float]]
    busy: Optional[BenchGpuBusy]
    power_busy: Optional[PowerBusy]


Samples = dict[str, dict[str, list[Optional[float]]]]   # PCI bus -> reading -> values


class BenchRun(TypedDict, total=False):
    """One run of the benchmark."""

    run: Optional[int]
    value: Optional[float]
    exit_code: Optional[int]
    seconds: Optional[float]
    output_tail: Optional[str]
    gpus: dict[str, BenchGpu]
    samples: Samples
    buffered: Samples
    sampler: Optional[dict[str, Optional[float]]]


class BenchServer(TypedDict, total=False):
    """The server `--serve` started for the runs and stopped after them."""

    command: Optional[str]
    argv: list[str]
    pid: Optional[int]
    ready_after_s: Optional[float]
    env: dict[str, Optional[str]]
    stopped: Optional[str]
    workers: dict[str, Process]


class Telemetry(TypedDict, total=False):
    available: Optional[bool]
    reason: Optional[str]
    gpus: dict[str, BenchGpu]


class BenchRequired(TypedDict):
    values: list[float]


class Bench(BenchRequired, total=False):
    """`envsnap bench`'s record: runs measured on the state the document holds."""

    command: Optional[str]
    cwd: Optional[str]
    metric: Optional[str]
    lower_is_better: Optional[bool]
    repeat: Optional[int]
    host: Optional[str]
    sample_interval: Optional[float]
    run_timeout: Optional[float]
    started_at: Optional[str]
    finished_at: Optional[str]
    summary: dict[str, Optional[float]]
    runs: list[BenchRun]
    telemetry: Optional[Telemetry]
    server: Optional[BenchServer]


# ---- the document ---------------------------------------------------------------------------
class SnapshotRequired(TypedDict):
    schema: int
    meta: Meta
    facts: Facts


class Snapshot(SnapshotRequired, total=False):
    """An envsnap snapshot: one host's environment at one moment."""

    volatile: Volatile
    digests: dict[str, str]      # section -> sha256 of its facts
    bench: Bench

