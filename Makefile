# riskgate: two commands for a newcomer, `make demo` and `make test`.
UV ?= $(shell command -v uv 2>/dev/null || echo "python3 -m uv")
VENV := .venv
PY := $(VENV)/bin/python
SHARED ?= $(abspath ../shared)
export RISKGATE_SHARED := $(SHARED)

.PHONY: env test demo screenshot bench lint clean

$(VENV)/.synced: pyproject.toml uv.lock
	@command -v uv >/dev/null 2>&1 || python3 -m pip install --quiet uv
	$(UV) sync --frozen --all-groups
	@touch $@

env: $(VENV)/.synced

test: env
	$(PY) -m pytest -q tests

demo: env
	$(VENV)/bin/riskgate example build/demo
	$(VENV)/bin/riskgate gate --config examples/gate.yaml || [ $$? -le 2 ]

# the README's picture: the demo's report in headless Chromium (needs Debian's chromium)
screenshot: demo
	$(VENV)/bin/riskgate screenshot build/demo/runs/census-demo-2026 --out docs/report.png --max-height 2400

bench: env
	$(PY) bench/run_all.py

lint: env
	$(VENV)/bin/ruff check riskcore tasks flows tests bench || true

clean:
	rm -rf $(VENV) build .pytest_cache
