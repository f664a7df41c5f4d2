# riskgate: two commands for a newcomer, `make demo` and `make test`.
UV ?= $(shell command -v uv 2>/dev/null || echo "python3 -m uv")
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: env test lint demo screenshot bench clean

$(VENV)/.synced: pyproject.toml uv.lock
	@command -v uv >/dev/null 2>&1 || python3 -m pip install --quiet uv
	$(UV) sync --frozen --all-groups --all-extras
	@touch $@

# the families' numba kernels compiled once for the types a gate gives them (riskcore/gate/
# kernels.py): else the first gate of a fresh checkout compiles them in its measures (7-10 s);
# again when the code changes, as numba's cache is keyed on the source files
$(VENV)/.kernels: $(VENV)/.synced $(shell find riskcore -name '*.py')
	$(PY) -m riskcore.gate.kernels
	@touch $@

# the project's own modules compiled once (uv compiles the dependencies): every gate, flow
# run and helper process would compile them again where PYTHONDONTWRITEBYTECODE is set
env: $(VENV)/.synced $(VENV)/.kernels
	@$(PY) -m compileall -q riskcore tasks flows

# ruff and mypy first (they take seconds), then the suite: a file per process, the files
# that wait on the clock first (tests/conftest.py), three processes on two cores so that their
# waits are filled (measured on the 2-core machine, same clone: two processes 12:53, three
# 11:53, four 13:11)
test: lint
	$(PY) -m pytest -q --durations=15 -n 3 --dist loadfile --no-loadscope-reorder tests

lint: env
	$(VENV)/bin/ruff check riskcore tasks flows tests bench hatch_build.py
	$(VENV)/bin/mypy

# the gate end to end on the bundled example: a private local Prefect API unless
# PREFECT_API_URL is set; a verdict (0 approved, 1 rejected, 2 needs review) is a
# successful demo, an error (3) or a usage error (64) fails it
demo: env
	$(VENV)/bin/riskgate example build/demo
	$(VENV)/bin/riskgate gate --config examples/gate.yaml; rc=$$?; \
	  case $$rc in 0|1|2) exit 0 ;; *) exit $$rc ;; esac

# the README's picture: the demo's report in headless Chromium (needs Debian's chromium)
screenshot: demo
	$(VENV)/bin/riskgate screenshot build/demo/runs/census-demo-2026 --out docs/report.png --max-height 2400

bench: env
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) build .pytest_cache .mypy_cache .ruff_cache
