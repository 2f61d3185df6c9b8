"""The snapshot document's shape, the one description of it (schema 1).

Read with envsnap/snapshot/document.py (what each part means) and the agent's collectors
(envsnap/agent/*.py, which produce `facts` and `volatile`). Exported as
docs/snapshot.schema.json (JSON Schema 2020-12) by exported_text();
tests/unit/snapshot/test_schema.py checks that the committed file is what this module
exports (and says how to rewrite it).

Conventions the agent follows, and so this description:
- a reading the host cannot give is null, so scalar facts are "X or null";
- a collection is a mapping keyed by its natural id (a repo path, a PCI bus, a pid);
- something that could not be read at all is `{"error": why}` in its place, which every
  record here accepts (its fields are all optional) and GPU readings accept explicitly;
- a collector that failed leaves its section `{}` and says why in meta.collectors;
- a field this version does not know is kept as it is (a newer agent may add readings).
"""
from __future__ import annotations

import json

from envsnap.agent import sections as agent_sections
from envsnap.agent.patterns import proc_pattern_problem, regex_problem
from envsnap.snapshot.spec import (
    AnyValue,
    CheckedText,
    JsonObject,
    ListOf,
    MapOf,
    OneOf,
    OneOfValues,
    Record,
    Scalar,
    Spec,
    export,
)

SCHEMA_ID = "https://envsnap.invalid/snapshot.schema.json"

# Scalars. The `_` forms are "or null": the agent's word for "could not be read".
STR, INT, NUM, BOOL = Scalar(("string",)), Scalar(("integer",)), Scalar(("number",)), \
    Scalar(("boolean",))
STR_, INT_, NUM_, BOOL_ = (Scalar((kind, "null")) for kind in ("string", "integer", "number",
                                                                "boolean"))
STRINGS = ListOf(STR)
NAME_TO_STR = MapOf(STR_, key="name")


def record(record_name: str, doc: str = "", /, required: tuple[str, ...] = (),
           rest: Spec | None = None, **fields: Spec) -> Record:
    """A record by keywords; its fields may be called `name` or `doc` (hence positional-only)."""
    return Record(record_name, fields, required, rest or AnyValue(), doc)


def optional(spec: Spec) -> OneOf:
    return OneOf((Scalar(("null",)), spec))


FAILED = Record("failed", {"error": STR}, ("error",), Scalar(("null",)),
                "what could not be read, and why", words='{"error": why}')

# ---- system ---------------------------------------------------------------------------------
LIMIT_VALUE = OneOf((INT_, OneOfValues(("unlimited",))))
LIMIT = record("limit", "a resource limit: a number, or unlimited",
               soft=LIMIT_VALUE, hard=LIMIT_VALUE)
LIMITS = MapOf(LIMIT, key="resource")
SYSTEM = record(
    "system", "the host: kernel, CPU, memory, NUMA, IOMMU, limits (agent/system.py)",
    hostname=STR_, boot_id=STR_, cmdline=STR_,
    kernel=record("kernel", release=STR_, version=STR_, machine=STR_),
    cpu=record("cpu", model=STR_, logical_cpus=INT_, physical_cores=INT_, sockets=INT_,
               online=STR_, smt=STR_, vendor_id=STR_, family=STR_, model_id=STR_,
               stepping=STR_, flags=STR_, address_sizes=STR_, op_modes=STR_,
               byte_order=STR_, caches=MapOf(STR_, key="cache"),
               vulnerabilities=MapOf(STR_, key="vulnerability")),
    governors=MapOf(INT, key="governor"),
    memory=record("memory", total_kib=INT_, swap_total_kib=INT_, hugepages_total=INT_,
                  hugepage_size_kib=INT_),
    numa=MapOf(record("numa_node", cpulist=STR_, mem_total_kib=INT_), key="node"),
    iommu=record("iommu", groups=INT_, cmdline=NAME_TO_STR),
    limits=LIMITS,
    os_release=NAME_TO_STR,
    transparent_hugepage=NAME_TO_STR,
    toolchain=record("toolchain", "the compilers, CMake and libc torch's collect_env reports "
                     "(agent/toolchain.py)", gcc=STR_, clang=STR_, cmake=STR_, libc=STR_),
)

# ---- nvidia ---------------------------------------------------------------------------------
GPU_INT = ("index clock_app_graphics_mhz clock_app_mem_mhz clock_default_app_graphics_mhz "
           "clock_default_app_mem_mhz clock_max_graphics_mhz clock_max_mem_mhz clock_max_sm_mhz "
           "clock_max_video_mhz memory_total_mib nvlink_active pcie_gen_current pcie_gen_gpu_max "
           "pcie_gen_max pcie_width_current pcie_width_max temp_shutdown_c temp_slowdown_c "
           "numa_node").split()
GPU_NUM = ("power_default_limit_w power_enforced_limit_w power_limit_w power_max_limit_w "
           "power_min_limit_w").split()
GPU_STR = ("name uuid architecture compute_capability compute_mode cpu_affinity numa_affinity "
           "ecc_mode_current ecc_mode_pending mig_mode_current mig_mode_pending persistence_mode "
           "inforom_image vbios clock_event_reasons_supported_mask").split()


def reading(spec: Spec) -> Spec:
    """A GPU reading: its value, null (not supported), or {"error": why} (the read failed)."""
    return OneOf((spec, FAILED))


READING = OneOf((Scalar(("string", "integer", "number", "boolean", "null")), STRINGS, FAILED))
GPU = Record(
    "gpu", {**{name: reading(INT_) for name in GPU_INT},
            **{name: reading(NUM_) for name in GPU_NUM},
            **{name: reading(STR_) for name in GPU_STR},
            "clock_event_reasons_supported": reading(STRINGS), "error": STR_},
    rest=READING, doc="one GPU's configuration, keyed by PCI bus in nvidia.gpus")
GPU_READINGS = Record(
    "gpu_readings", {**{name: reading(INT_) for name in (
        "clock_graphics_mhz clock_mem_mhz clock_sm_mhz ecc_corrected_aggregate "
        "ecc_corrected_volatile ecc_uncorrected_aggregate ecc_uncorrected_volatile "
        "memory_used_mib pcie_replay_count temperature_c utilization_gpu_pct "
        "utilization_mem_pct fan_pct").split()},
        **{name: reading(NUM_) for name in ("energy_j", "power_draw_w")},
        **{name: reading(STR_) for name in ("clock_event_reasons_mask", "pstate")},
        "clock_event_reasons": reading(STRINGS),
        "remapped_rows": reading(optional(MapOf(INT_, key="kind")))},
    rest=READING, doc="one GPU's volatile readings (clocks, temperatures, use)")
KERNEL_MODULE = record(
    "kernel_module", "the NVIDIA kernel module: loaded, on disk, built how",
    version=STR_, flavor=STR_, gcc=STR_, gcc_line=STR_, nvrm_line=STR_, srcversion=STR_,
    arch=STR_, build=STR_, build_date=STR_, build_type=STR_, description=STR_,
    file=optional(record("module_file", path=STR_, size=INT_, mtime=STR_)),
    file_matches_loaded=BOOL_, loaded=NAME_TO_STR, modinfo=optional(NAME_TO_STR),
    params=NAME_TO_STR)
NVIDIA = record(
    "nvidia", "driver, kernel module, GPUs and their topology (agent/nvidia.py)",
    present=BOOL_, source=STR_, reason=STR_, driver=STR_, cuda_driver=STR_, nvml_version=STR_,
    gpu_count=INT_, gpus=MapOf(GPU, key="PCI bus id"),
    topology=MapOf(MapOf(STR_, key="PCI bus id"), key="PCI bus id"),
    kernel_module=optional(KERNEL_MODULE),
    userspace_library=optional(record("userspace_library", path=STR_, version=STR_)))

# ---- cuda_nccl ------------------------------------------------------------------------------
VERSION = record("version_source", "a version and where it was read", version=STR_,
                 source=STR_, found_by=STR_, reason=STR_, path=STR_, error=STR_)
CUDA_NCCL = record(
    "cuda_nccl", "CUDA toolkit, cuDNN, NCCL, torch's build (agent/cuda_nccl.py)",
    cuda_toolkit=optional(VERSION), cuda_toolkits_installed=MapOf(STR_, key="folder"),
    cudnn=record("cudnn", headers=MapOf(STR_, key="header path"),
                 wheels=MapOf(VERSION, key="wheel"),
                 libraries=MapOf(STR_, key="library path"), torch=optional(VERSION)),
    nccl=record("nccl", torch=optional(VERSION), wheels=MapOf(VERSION, key="wheel"),
                libraries=MapOf(VERSION, key="library path")),
    nvidia_wheels=MapOf(STR_, key="wheel"),
    torch=optional(record("torch", version=STR_, cuda=STR_, hip=STR_, debug=BOOL_,
                          git_version=STR_, path=STR_, source=STR_, reason=STR_)),
    rocm=record("rocm", "AMD's stack as a pasted report states it (imports)",
                version=STR_, hip_runtime=STR_, miopen=STR_, driver=STR_, hipcc=STR_,
                gpus=MapOf(STR_, key="GPU"),
                topology=MapOf(MapOf(STR_, key="GPU"), key="GPU")))

# ---- python_env -----------------------------------------------------------------------------
CUSTOMIZE_FIELDS: dict[str, Spec] = dict(
    path=STR_, real_path=STR_, content=STR_, sha256=STR_, size=INT_, imported=BOOL_,
    redacted=BOOL_, truncated=BOOL_, error=STR_)
CUSTOMIZE = Record("customize_file", CUSTOMIZE_FIELDS, (), AnyValue(),
                   "sitecustomize/usercustomize: the file as found")
SHADOWED_CUSTOMIZE = Record(
    "shadowed_customize", {**CUSTOMIZE_FIELDS, "module": STR_, "shadowed_by": STR_,
                           "shadowed_by_real": STR_}, (), AnyValue(),
    "a sitecustomize.py/usercustomize.py on sys.path that never runs: an earlier one wins")
PYTHON_ENV = record(
    "python_env", "the interpreter, its packages and start-up hooks (agent/python_env.py)",
    interpreter=record("interpreter", executable=STR_, executable_real=STR_, version=STR_,
                       implementation=STR_, build=STR_, prefix=STR_, base_prefix=STR_,
                       venv=BOOL_, flags=MapOf(BOOL_, key="flag")),
    packages=MapOf(STR_, key="distribution"), editable=MapOf(STR_, key="distribution"),
    outside_site=STRINGS,
    conda=MapOf(record("conda_package", "a package as `conda list` gives it (an import only: "
                       "imports/conda.py)", version=STR_, build=STR_, channel=STR_),
                key="conda package"),
    direct_urls=MapOf(AnyValue(), key="distribution"),
    shadowed=MapOf(AnyValue(), key="module"),
    customize=MapOf(optional(CUSTOMIZE), key="hook"),
    customize_shadowed=MapOf(SHADOWED_CUSTOMIZE, key="path"),
    user_site=record("user_site", "whether the user site (usercustomize) is on",
                     enabled=BOOL_, path=STR_),
    startup_pth=MapOf(record("startup_pth", code_lines=STRINGS, sha256=STR_, error=STR_),
                      key=".pth path"),
    site_dirs=STRINGS, sys_path=STRINGS)

# ---- env ------------------------------------------------------------------------------------
PROCESS = record(
    "process", "a matched process (a server, a torchrun worker), keyed by pid",
    cmdline=STRINGS, exe=STR_, cwd=STR_, ppid=INT_, matched=STR_, start_since_boot_s=NUM_,
    start_epoch=NUM_, env=MapOf(STR_, key="variable"), limits=LIMITS, error=STR_,
    role=STR_)
ENV = record(
    "env", "the shell's and matched processes' environment (agent/env.py)",
    shell=MapOf(STR_, key="variable"), processes=MapOf(PROCESS, key="pid"),
    processes_omitted=INT_, proc_patterns=STRINGS, env_prefixes=STRINGS)

# ---- git ------------------------------------------------------------------------------------
BLOB = record("blob", "a text (a patch) with its size and digest; text may be truncated",
              bytes=INT_, sha256=STR_, truncated=BOOL_, text=STR_, error=STR_,
              files=MapOf(record("patch_file", "one file's part of the whole patch, measured "
                                 "past the cap", bytes=INT_, sha256=STR_), key="path"),
              files_total=INT_)
COMMIT = record("commit", sha=STR_, parents=STRINGS, time=INT_, author=STR_, subject=STR_,
                files=STRINGS, shallow_boundary=BOOL_)
REFLOG = record("reflog_entry", selector=STR_, old=STR_, new=STR_, time=INT_, tz=STR_,
                message=STR_)
REPO = record(
    "repo", "one repository, keyed by its path; {error} when it cannot be read",
    head=STR_, branch=STR_, upstream=STR_, ahead=INT_, behind=INT_, detached=BOOL_,
    detached_at=STR_, detached_at_name=STR_, detached_from=STR_, detached_from_name=STR_,
    shallow=BOOL_, shallow_boundary=STRINGS, realpath=STR_, toplevel=STR_, given_path=STR_,
    held_by=optional(record(
        "held_by", "the envsnap restore, bisect or explain holding the checkout's lock at "
        "capture: the state recorded is envsnap's, not the user's (agent/gitlock.py)",
        controller=STR_, pid=INT_, command=STR_, since=STR_)),
    remotes=MapOf(STR_, key="remote"),
    history=ListOf(COMMIT), history_limit=INT_, history_complete=BOOL_,
    reflog=ListOf(REFLOG), reflog_truncated=BOOL_,
    submodules=MapOf(record("submodule", "recorded: the commit the superproject's index "
                            "holds; checked_out: the submodule's HEAD (null: not checked out)",
                            recorded=STR_, checked_out=STR_, initialized=BOOL_,
                            modified=BOOL_, untracked=BOOL_), key="submodule path"),
    in_progress=optional(record(
        "in_progress", "a rebase, am, merge, cherry-pick, revert or bisect stopped half-way, "
        "with its conflicted files", operation=STR_, conflicted=STRINGS, onto=STR_, branch=STR_,
        merge_head=STR_, cherry_pick_head=STR_, revert_head=STR_)),
    stashes=MapOf(record("stash", sha=STR_, base=STR_, message=STR_, time=INT_,
                         has_untracked=BOOL_, patch=optional(BLOB)), key="stash ref"),
    stashes_error=STR_,
    uncommitted=optional(record("uncommitted", dirty=BOOL_, digest=STR_,
                                tracked=MapOf(STR_, key="path"),
                                untracked=MapOf(AnyValue(), key="path"),
                                untracked_count=INT_, untracked_truncated=BOOL_,
                                patch=optional(BLOB), staged=optional(BLOB))),
    error=STR_)
GIT = record("git", "repositories: HEAD, history, reflog, uncommitted work (agent/git.py)",
             git=optional(record("git_tool", path=STR_, version=STR_)),
             repos=MapOf(REPO, key="repository path"))

SECTION_SPECS = {spec.name: spec for spec in (SYSTEM, NVIDIA, CUDA_NCCL, PYTHON_ENV, ENV, GIT)}
SECTIONS: dict[str, Spec] = {name: SECTION_SPECS[name] for name in agent_sections.SECTIONS}
# A section this version does not know (a newer collector) is still a mapping.
OTHER_SECTION = MapOf(AnyValue(), key="fact")

VOLATILE = record(
    "volatile", "readings that move on their own; diffed only on request",
    rest=OTHER_SECTION,
    system=record("system_readings", uptime_seconds=NUM_, mem_available_kib=INT_,
                  loadavg=MapOf(NUM_, key="window"),
                  numa_mem_total_kib=MapOf(INT_, key="node"), bogomips=STR_),
    nvidia=record("nvidia_readings", gpus=MapOf(GPU_READINGS, key="PCI bus id")),
    git=record("git_readings", seconds=MapOf(NUM_, key="repository path")))

# Regexes a restore or a rerun matches again: one that could backtrack catastrophically
# makes the snapshot invalid (agent/patterns.py; docs/guide/capture.md, "Patterns").
PROC_PATTERN = CheckedText(proc_pattern_problem, "a process pattern: a regex without nested "
                           "repetition, or a plain substring")
METRIC = CheckedText(regex_problem, "the metric regex: without nested repetition",
                     nullable=True)

# ---- meta, bench, the document --------------------------------------------------------------
META = record(
    "meta", "who captured what, when, how; per-collector timings and errors",
    label=STR, host=STR, address=STR_, captured_at=STR, envsnap_version=STR_,
    agent=record("agent", "the agent that ran on the host, and its own cost there: "
                 "start-up (interpreter and imports) and the masking pass, in seconds",
                 version=STR_, pid=INT_, python=STR_, python_version=STR_,
                 startup_seconds=NUM_, masking_seconds=NUM_),
    config=record("capture_config", "the options the capture ran with",
                  repos=STRINGS, procs=ListOf(PROC_PATTERN), hot_paths=STRINGS, python=STR_,
                  timeout=NUM_),
    collectors=MapOf(record("collector", "null error: captured; a string: why not",
                            seconds=NUM_, error=STR_), key="section"),
    imported=record(
        "imported", "a snapshot read from pasted tool outputs (envsnap import): partial, "
        "it knows only what those outputs carry; a section none carries has its collector "
        "error say so, and `complete` names the collections given whole",
        partial=BOOL_, complete=STRINGS,
        sources=MapOf(record("import_source", "one file read", sha256=STR_, tool=STR_,
                             format=STR_, version=STR_, lines=INT_), key="file")),
    signature=record("signature", "whose snapshot: an HMAC of every other field under the "
                     "capturing user's key (snapshot/provenance.py); absent: foreign",
                     algorithm=STR, key=STR, digest=STR))
STATS = record("stats", "a reading's spread over a run's samples",
               min=NUM_, median=NUM_, max=NUM_)
REASONS = MapOf(NUM_, key="clock event reason")
GPU_BUSY = record("bench_gpu_busy", "the same, over the samples when the GPU was busy",
                  rest=optional(STATS), samples=INT_, clock_event_reasons=REASONS)
POWER_BUSY = record("bench_power_busy", "busy phases seen in the driver's buffered power "
                    "samples (about every 20 ms): power above threshold_w",
                    phases=INT_, seconds=NUM_, threshold_w=NUM_, buffered=INT_)
BENCH_GPU = record(
    "bench_gpu", "one GPU's telemetry while the benchmark ran", rest=optional(STATS),
    index=INT_, name=STR_, pcie_source=STR_, samples=INT_, error=STR_,
    clock_event_reasons=REASONS, busy=optional(GPU_BUSY), power_busy=optional(POWER_BUSY))
BENCH_RUN = record(
    "bench_run", "one run of the benchmark",
    run=INT_, value=NUM_, exit_code=INT_, seconds=NUM_, output_tail=STR_,
    gpus=MapOf(BENCH_GPU, key="PCI bus id"),
    samples=MapOf(MapOf(ListOf(NUM_), key="reading"), key="PCI bus id"),
    buffered=MapOf(MapOf(ListOf(NUM_), key="reading"), key="PCI bus id"),
    sampler=optional(MapOf(NUM_, key="counter")))
SERVER = record(
    "bench_server", "the server `--serve` started for the runs and stopped after them; its "
    "processes are also workers of the snapshot (env.processes, role server)",
    command=STR_, argv=STRINGS, pid=INT_, ready_after_s=NUM_, env=MapOf(STR_, key="variable"),
    stopped=STR_, workers=MapOf(PROCESS, key="pid"))
TELEMETRY = record("telemetry", "GPU telemetry over all runs; reason when unavailable",
                   available=BOOL_, reason=STR_, gpus=MapOf(BENCH_GPU, key="PCI bus id"))
BENCH = record(
    "bench", "`envsnap bench`'s record: runs measured on the state this document holds",
    required=("values",), values=ListOf(NUM), command=STR_, cwd=STR_, metric=METRIC,
    lower_is_better=BOOL_, repeat=INT_, host=STR_, sample_interval=NUM_, run_timeout=NUM_,
    started_at=STR_, finished_at=STR_, summary=MapOf(NUM_, key="statistic"),
    runs=ListOf(BENCH_RUN), telemetry=optional(TELEMETRY), server=optional(SERVER))
DOCUMENT = record(
    "snapshot", "an envsnap snapshot: one host's environment at one moment",
    required=("schema", "meta", "facts"),
    schema=INT, meta=META,
    facts=Record("facts", SECTIONS, rest=OTHER_SECTION,
                 doc="configuration, by section: what a diff compares by default"),
    volatile=VOLATILE,
    digests=MapOf(STR, key="section"),
    bench=BENCH)


def exported() -> JsonObject:
    """The description as JSON Schema (draft 2020-12): docs/snapshot.schema.json."""
    return export(DOCUMENT, title="envsnap snapshot (schema 1)", identifier=SCHEMA_ID)


def exported_text() -> str:
    return json.dumps(exported(), indent=2) + "\n"
