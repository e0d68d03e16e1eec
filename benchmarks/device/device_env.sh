# Sourced by the device scripts (pilot_gpu.sh, server_ab.sh, benchmarks/server_speed.sh) on a machine that has torch but not
# this project installed (the lent H200): installs the carried cp312 wheels (.whl/) into /tmp/site, puts
# them and src/ on the path and a `qualflow` launcher on PATH. Where there is no .whl/ (this project's
# own environment, or one that already has the dependencies: the wheels are cp312, and a venv of another
# Python cannot take them), it only adds the launcher. Needs ROOT (the repository root).
if [ -d "$ROOT/.whl" ] && ! python3 -c "import aiperf, fastapi, safetensors" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$ROOT"/.whl/*.whl || return 1
  export PYTHONPATH=/tmp/site:$ROOT/src PATH=/tmp/site/bin:$PATH
fi
mkdir -p /tmp/qf-bin
printf '#!/bin/sh\nexec python3 -m qualflow.cli "$@"\n' > /tmp/qf-bin/qualflow && chmod +x /tmp/qf-bin/qualflow
export PATH=/tmp/qf-bin:$PATH PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/inductor}
