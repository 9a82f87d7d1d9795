# tcplab — every target installs what it needs first, so on a fresh Debian/Ubuntu machine
# `make report` and `make test` are the only two commands needed (as root).

# Debian's own Python where there is one: a .venv made from it can be used by every user of the
# machine (a Python under /root cannot), which the UML kernel's live labs without root need.
PYTHON      ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)
VENV        := .venv
PY          := $(VENV)/bin/python
TCPLAB      := $(VENV)/bin/tcplab
# Report selection; see docs/course.md, "Making reports".
CASES       ?= all
PROFILE     ?= quick
EDITION     ?= instructor
MODE        ?= auto
KERNEL      ?= auto
FRESH       ?= 0
# EXERCISES=skip runs each case without its exercises (a quicker check of a kernel).
EXERCISES   ?= run
# The pages' language: `make report LANG=zh` (a strings file in lib/tcplab/strings/; see
# docs/translating.md). LANG from the environment is the locale, not a choice of language for the
# course: only LANG given on the command line counts, and the recipes then get a UTF-8 locale back.
ifeq ($(origin LANG),command line)
REPORT_LANG := $(LANG)
override LANG := C.UTF-8
else
REPORT_LANG :=
endif
# Where `make report` writes (REPORTS_DIR), one shard of the course (SHARD=2/4), and the shards'
# directories `make merge` renders from (SHARDS="dir1 dir2 …"); see docs/course.md, "Across machines".
REPORTS_DIR ?= reports
SHARD       ?=
SHARDS      ?=
# Extra pytest arguments, e.g. make test PYTEST_ARGS="-k path -x"
PYTEST_ARGS ?=
# The lab's own tests, run again inside the UML kernel (booting UML inside UML is not among them,
# nor what a learner meets on the host: user namespaces, the roads' faults and the machine-wide
# measurement queue are the host's, and their learners run UML themselves where they need it;
# nor the lifecycle tests: how the lab's processes start, fail and are cleaned up is the same code
# on any kernel, and on a slow machine's UML they took minutes of the leg; nor the tests that need
# no kernel (not marked `kernel`: parsers, parameters, verdicts), the host leg's already, which
# took 5:21 of the leg in UML on 2026-11-30).
UML_LAB_TESTS := tests/lab tests/traffic tests/observe --ignore=tests/lab/test_uml.py --ignore=tests/lab/test_userns.py \
                 --ignore=tests/lab/test_lab_faults.py --ignore=tests/lab/test_queue.py -m "kernel and not lifecycle"

# System tools the lab, the captures and the PDF rendering call.
APT_PACKAGES := iproute2 iptables ethtool tcpdump tshark tcptrace iputils-ping procps curl iperf3 \
                libnetfilter-queue-dev build-essential python3-dev chromium fonts-noto-cjk fonts-dejavu-core \
                poppler-utils libjs-katex user-mode-linux kmod util-linux nodejs
# JupyterHub's proxy (configurable-http-proxy, from npm) for the class tests and the hub example.
CHP         := $(VENV)/node/node_modules/.bin/configurable-http-proxy

.PHONY: setup system-packages test-users test test-host test-uml report merge render release replay-data bench stress jupyter doctor cleanup clean help

help:
	@echo "make report   run every case and render reports/ (HTML, PDF, handout); LANG=zh: in Chinese"
	@echo "make test     run the test suite on the host kernel and in a UML kernel (real namespaces; needs root)"
	@echo "make report SHARD=2/4 REPORTS_DIR=dir; make merge SHARDS='dir1 dir2 …'   the course across machines"
	@echo "make release  the notebooks students run, in release/: no answers, no outputs (CASES=, LANG=zh)"
	@echo "make bench    fidelity, capture overhead, pcap engine and report timings"
	@echo "make replay-data  rerun every case live and ship its runs in data/replay/ (maintainers)"
	@echo "make jupyter  JupyterLab on the course (course/) with the project's kernel"
	@echo "make doctor   what this machine can do; make cleanup   remove leftovers of killed runs"

setup: system-packages $(VENV)/.installed $(CHP)

# Installs only what is missing, so a second run costs a dpkg query.
system-packages:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  if [ "$$(id -u)" != 0 ]; then echo "need root to install:$$missing" >&2; exit 3; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@touch $@

# Beside the .venv, readable by every user as the .venv is (the hub runs it as root).
$(CHP):
	npm install --silent --no-audit --no-fund --prefix $(VENV)/node configurable-http-proxy@5

# The unprivileged learners the tests run as (the user-namespace lab, JupyterLab in a browser,
# a JupyterHub with two learners): system users with a home, made once, as root.
TEST_USERS := tcplab-learner1 tcplab-learner2
test-users:
	@if [ "$$(id -u)" = 0 ]; then for u in $(TEST_USERS); do \
	  id -u $$u >/dev/null 2>&1 || useradd --create-home --shell /bin/bash --comment "tcplab test learner" $$u; \
	done; fi

# The suite on both lab kernels: this machine's, then a User-mode Linux kernel (netem, stock
# sysctls) — the lab tests run inside it, the course runs its lab there. Either failing fails.
test: test-host test-uml

# The course in UML belongs to the UML leg alone (it would otherwise run twice).
test-host: setup test-users
	$(PY) -m pytest --durations=15 $(PYTEST_ARGS) --ignore=tests/test_course_uml.py

test-uml: setup
	$(TCPLAB) uml run -- $(PY) -m pytest --color=no --durations=15 $(PYTEST_ARGS) $(UML_LAB_TESTS)
	$(PY) -m pytest $(PYTEST_ARGS) tests/test_course_uml.py

report: setup
	$(TCPLAB) report --cases $(CASES) --profile $(PROFILE) --edition $(EDITION) --mode $(MODE) --kernel $(KERNEL) \
	  --exercises $(EXERCISES) $(if $(REPORT_LANG),--language $(REPORT_LANG)) --reports-dir $(REPORTS_DIR) $(if $(filter 1,$(FRESH)),--fresh) $(if $(SHARD),--shard $(SHARD))

# The handout and summary of a sharded course, from its shards' directories, running nothing.
merge: setup
	$(TCPLAB) report --merge $(SHARDS) --edition $(EDITION) $(if $(REPORT_LANG),--language $(REPORT_LANG)) --reports-dir $(REPORTS_DIR)

render: setup
	$(TCPLAB) report --cases $(CASES) --edition $(EDITION) $(if $(REPORT_LANG),--language $(REPORT_LANG)) --reports-dir $(REPORTS_DIR) --render-only

# The case notebooks students run in JupyterLab (no worked answers, no outputs), in release/.
release: setup
	$(TCPLAB) release $(CASES) $(if $(REPORT_LANG),--language $(REPORT_LANG)) -o release

# Maintainers: refresh the recorded runs that replay mode ships (data/replay/).
replay-data: setup
	$(TCPLAB) report --cases $(CASES) --profile quick --mode live --fresh --formats html
	$(TCPLAB) replay save $(CASES)

bench: setup
	$(PY) bench/run_all.py

# Zero flakes, measured: the quick course 5 times quiet and 5 times beside a CPU hog (bench/results/stress-*.json).
stress: setup
	$(PY) bench/stress_course.py

jupyter: setup
	$(VENV)/bin/jupyter lab --allow-root --ip=127.0.0.1 --notebook-dir=course

doctor: setup
	$(TCPLAB) doctor

cleanup: setup
	$(TCPLAB) cleanup

clean:
	rm -rf reports/*.html reports/*.pdf reports/*.ipynb reports/handout* data/runs
