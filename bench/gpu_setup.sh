#!/usr/bin/env bash
# On a GPU machine whose python3 has torch and numpy but cannot reach a package index,
# from a copy of the repository's root: make the plugin importable under that python3,
# then run what follows as a command.  cffi travels as wheels in .whl/ (git-ignored),
# fetched beforehand on a machine that can reach the index with
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --implementation cp --platform manylinux2014_x86_64 -d .whl cffi==2.0.0 pycparser
#   bash bench/gpu_setup.sh python3 bench/gpu_check.py --out "$OUT"
set -euo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
# The extension for this interpreter, in place (the .so built elsewhere is not carried).
python3 setup.py -q build_ext --inplace >/tmp/build.log 2>&1 || { tail -40 /tmp/build.log; exit 1; }
# pytest finds the plugin by its entry point when installed; here, by name.
export PYTEST_PLUGINS=pytest_opprof.plugin PYTHONUNBUFFERED=1
python3 -c 'import torch, numpy, pytest_opprof; print("torch", torch.__version__, "numpy", numpy.__version__, torch.cuda.get_device_name())'
"$@"
