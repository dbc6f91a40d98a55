# The two commands of the README:  make demo  and  make test.
# Both create .venv on first use (nothing needed but python3 >= 3.10).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
# torch/torchvision pinned to releases that install from local wheels where a
# machine has them; pyproject.toml keeps the ranges loose for real users.
TORCH  := torch==2.14.1 torchvision==0.29.1
# Ray pinned to the version of the cluster image (cluster/Dockerfile): a
# driver and a cluster of different Ray versions refuse each other.
RAY    := ray[tune]==2.60.0
STAMP  := $(VENV)/.installed
# every other package at the version the tests last passed with (see its header)
PINS   := constraints.txt

.PHONY: demo test test-long install test-fast bench clean

# --no-compile, then one compileall on every core: pip byte-compiles each
# wheel's ~18,000 modules one after another (47 s of a 107 s install on 2
# cores, 2026-12-06); compileall -j 0 does the same work in parallel (30 s).
# The .pyc files must be written here: where PYTHONDONTWRITEBYTECODE is set
# (this machine, CI) nothing writes them later, and every process would
# compile torch, Ray and MLflow anew (~20 CPU-s for their imports).
# compileall's exit code is not checked: like pip, it skips the few files
# that are not this Python's syntax (torch's py312_intrinsics.py on 3.11),
# which nothing imports; a module it did not compile is compiled at import.
$(STAMP): pyproject.toml Makefile $(PINS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet --no-compile -c $(PINS) $(TORCH) '$(RAY)'
	$(PIP) install --quiet --no-compile -c $(PINS) -e '.[all]'
	$(PY) -m compileall -qq -j 0 $$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') || true
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/awnn compare --task spiralhard --budget quick --strategies fixed,awnn,tpe,asha,random,awnn-asha,fixedplus

# two pytest-xdist workers: most of a test's time is a CLI process waiting on
# Ray or MLflow, so two share 2 cores well (28:31 in one process -> 19:53,
# 2026-11-26).  --dist loadfile: a module's tests on one worker, so its module
# fixtures (a comparison, often) are built once; a session fixture is built
# once per worker that needs it.  (xdist 3.8's loadgroup does not group under
# pytest 9.2: it renames item._nodeid, which pytest 9.2 no longer reads.)
# TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2

test: $(STAMP)
	bash tests/system_deps.sh
	AWNN_REQUIRE_CHECKED_TORCH=1 $(PY) -m pytest tests -q -p no:cacheprovider --durations=25 -m "not long" \
	  $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile,)

# the long variants (about 5 min on 2 cores): run before landing a change to search/ or tracking/
test-long: $(STAMP)
	$(PY) -m pytest tests -q -p no:cacheprovider -m long

test-fast: $(STAMP)
	$(PY) -m pytest tests -q -m "not slow and not fault"

bench: $(STAMP)
	$(PY) benchmarks/step_overhead.py
	$(PY) benchmarks/width_adapts.py
	$(PY) benchmarks/sweep_overhead.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
