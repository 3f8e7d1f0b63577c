# inferlab: `make demo` runs the main job on the embedded lab; `make test` runs everything CI runs.
# Both bootstrap what they need (Debian packages, .venv) and are fast the second time.
SHELL := /bin/bash
.ONESHELL:
.SHELLFLAGS := -eu -o pipefail -c

VENV := .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
export PATH := $(CURDIR)/$(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg

DEB_PACKAGES := shellcheck openssh-server openssh-client iperf3 ethtool iputils-ping iproute2 rsync kmod procps python3 python3-venv \
	nginx-light gcc make git dwarves qemu-system-x86 debootstrap cpio zstd cmake g++
COLLECTION_LINK := .collections/ansible_collections/inferlab/distributed

.PHONY: all bootstrap deb venv gateway-venv collection ee-context engine engine-test demo test lint sanity unit contract install changelog molecule molecule-kernel molecule-negative molecule-cluster molecule-engine kernel-cache bench lab-up lab-down clean

all: test

# The two venvs are independent, each about a minute of pip (mostly CPU: unpacking, byte-compiling): built side by
# side. (make demo adds the engine to the same make, so that venv, which the engine needs too, is built once.)
BOOTSTRAP_PARTS := venv gateway-venv collection
bootstrap: deb
	$(MAKE) --no-print-directory -j2 $(BOOTSTRAP_PARTS)

# Debian packages. openssh-server would start and enable sshd on :22 on a systemd machine:
# hold services off with a temporary policy-rc.d, and leave an existing one alone.
deb: .cache/deb.stamp
.cache/deb.stamp: Makefile
	@missing=$$(for p in $(DEB_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q "install ok installed" || echo $$p; done)
	if [ -n "$$missing" ]; then
	  echo "installing Debian packages: $$missing"
	  created_policy=0
	  if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; created_policy=1; fi
	  trap 'if [ $$created_policy = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi' EXIT
	  apt-get update -qq
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing
	fi
	mkdir -p .cache && touch $@

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml constraints.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q -c constraints.txt -e '.[lab,test]'
	touch $@

# The lab gateway's LiteLLM, in a venv of its own beside .venv (the lab role finds it there): its pins conflict with
# the controller's. litellm[proxy]==1.108.7, never 1.107.0 (a compromised release).
GATEWAY_VENV := .venv-gateway
gateway-venv: $(GATEWAY_VENV)/.installed
$(GATEWAY_VENV)/.installed: constraints-gateway.txt
	test -x $(GATEWAY_VENV)/bin/python || python3 -m venv $(GATEWAY_VENV)
	$(GATEWAY_VENV)/bin/pip install -q -c constraints-gateway.txt 'litellm[proxy]==1.108.7'
	touch $@

# The execution environment's build input (execution-environment.yml): the collection's tarball under a name without
# its version, so that the EE definition does not change with a release.
ee-context: bootstrap
	rm -rf build/ee && $(BIN)/ansible-galaxy collection build --force --output-path build/ee .
	mv build/ee/inferlab-distributed-*.tar.gz build/ee/inferlab-distributed.tar.gz

collection: $(COLLECTION_LINK)
$(COLLECTION_LINK):
	mkdir -p $(dir $@)
	ln -sfn ../../.. $@

# The lab's real engine: llama.cpp's llama-server and ggml-rpc-server (GGML_RPC=ON), built from the pinned,
# hash-checked llama-cpp-python sdist by the script roles/llamacpp_engine runs on real hosts, once per machine: the
# install is cached by the source's sha256 and the build options under ENGINE_CACHE (outside the checkout, so every
# checkout on the machine shares it). About 6 minutes of 2 CPUs the first time, nothing after. ENGINE_INFO says where
# it is (its build-info.json: bin_dir, version, whether it was cached).
ENGINE_CACHE ?= $(or $(INFERLAB_ENGINE_CACHE),$(HOME)/.cache/inferlab/engine)
ENGINE_INFO := .cache/engine.json
engine: deb venv
	mkdir -p .cache
	bash roles/llamacpp_engine/files/build_llamacpp.sh $(ENGINE_CACHE) > $(ENGINE_INFO).partial
	mv $(ENGINE_INFO).partial $(ENGINE_INFO)
	$(PY) -c 'import json, sys; info = json.load(open(sys.argv[1])); print("engine:", info["version"], "in", info["bin_dir"], "(cached)" if info["cached"] else "(built in %d s)" % info["build_seconds"])' $(ENGINE_INFO)

# The engine's own tests (tests/engine/): the project's model loaded by the built llama-server over RPC, real
# completions, the server's counters and the speculative decoder's acceptance.
engine-test: engine
	$(BIN)/pytest -q -p no:cacheprovider tests/engine

# The full staged experiment on the lab with the real engine's two stages (inventory/plans/lab_demo.yml; the engine
# is built beside the bootstrap, once per machine); it ends with the run directory's path (stdout) and a short
# summary, then what `inferlab compare` says of the candidate driver against the stock one, on the lab's SGLang
# stand-in (stage 13 against 9) and on the real engine (stage 14 against 10): the lab's driver layer is emulated, and
# the comparison says so; one run a side, so the differences without a verdict, and the command that would give one
# (repeated whole runs).
DEMO_RUN := runs/$(shell date -u +%Y%m%dT%H%M%SZ)-demo
demo: deb
	$(MAKE) --no-print-directory -j2 $(BOOTSTRAP_PARTS) engine
	$(BIN)/inferlab lab up
	$(BIN)/inferlab run experiment --run-dir $(DEMO_RUN) -e @inventory/plans/lab_demo.yml
	$(BIN)/inferlab compare $(DEMO_RUN):nextn $(DEMO_RUN):nextn_candidate
	$(BIN)/inferlab compare $(DEMO_RUN):baseline_rpc $(DEMO_RUN):baseline_rpc_candidate

lab-up: bootstrap
	$(BIN)/inferlab lab up

lab-down: bootstrap
	$(BIN)/inferlab lab down

lint: bootstrap
	$(BIN)/ruff check src plugins tests molecule
	# Its own ANSIBLE_HOME: molecule installs a copy of the collection under ~/.ansible/collections, and ansible-lint
	# would resolve modules from that (possibly older) copy instead of this checkout.
	ANSIBLE_HOME=$(CURDIR)/.cache/ansible-lint-home $(BIN)/ansible-lint --profile production --offline
	$(MAKE) --no-print-directory changelog
	git diff --quiet -- CHANGELOG.md || { git diff --stat -- CHANGELOG.md; echo "lint: CHANGELOG.md is generated from changelogs/ (antsibull-changelog): run make changelog and commit it" >&2; exit 1; }

# CHANGELOG.md from changelogs/changelog.yaml (antsibull-changelog; changelogs/config.yaml says how a change adds
# its fragment): the fragments linted, the file regenerated. Run from the collection's path under .collections.
changelog: bootstrap
	cd $(COLLECTION_LINK) && $(CURDIR)/$(BIN)/antsibull-changelog lint && $(CURDIR)/$(BIN)/antsibull-changelog generate

# In UNIT_WORKERS processes (pytest-xdist; 0: in pytest's own process). Most of the unit tests' time is waiting on
# the real processes and servers they start, not CPU (one process: 168 s wall for 72 CPU-s; three workers: 69 s).
# A test that times something bounds a ratio or a generous ceiling, never a tight wall time: the workers run beside
# make test's background gates on a 2-CPU machine.
# The collection's tests (tests/unit/) run under `ansible-test units`, each in its context (modules, module_utils,
# controller) through Ansible's collection loader; the package's (tests/package/) under pytest. A plain
# `pytest -n 3` from the checkout runs both (pyproject.toml's testpaths), the quicker loop while working.
UNIT_WORKERS := 3
unit: bootstrap
	$(BIN)/pytest -q -n $(UNIT_WORKERS) tests/package
	bash tests/ansible_test/run.sh units --num-workers $(UNIT_WORKERS)

# SGLang's own argument parser checks the argv that roles/sglang_tp builds, in a venv of its own (sglang --no-deps,
# the CPU torch wheel found on disk; without that wheel the test skips and says why, and fails under CI=true:
# tests/contract/README.md).
CONTRACT_VENV := .cache/sglang-contract-venv
contract: bootstrap
	bash tests/contract/setup_venv.sh $(CONTRACT_VENV)
	$(CONTRACT_VENV)/bin/pytest -q tests/contract

sanity: bootstrap
	bash tests/ansible_test/run.sh sanity

# The package (a wheel, not editable) and the collection (the galaxy tarball) installed into a fresh venv and a
# collection path of their own, then used from outside the checkout (tests/install/run.sh). Molecule `default`'s
# verifier then runs `inferlab run verify --check` from that venv against the lab (built here once, or there).
INSTALL_DIR := .cache/install
install: bootstrap
	bash tests/install/run.sh $(INSTALL_DIR)

# Every scenario, one after the other, each timed (tests/molecule_scenario.sh). The scenarios on the embedded lab
# share one lab (INFERLAB_MOLECULE_SHARED_LAB=1, molecule/shared/destroy.yml): each still runs its own destroy and
# create, which prove the lab clean and healthy, but the lab is built once and removed once. Their playbooks run on
# the Ansible strategy `inferlab run` uses (src/inferlab/run/strategy.py); every restore play names ansible-core's
# linear itself. experiment comes last: its lab has no router (a different lab spec), so the lab is rebuilt once for
# it, not once more after it. Two chains of scenarios on two shared labs at once were tried and dropped: the lab scenarios
# keep both CPUs busy beside the background gates, so nothing was won, and the public route lost requests
# (docs/PERFORMANCE.md).
MOLECULE_LAB_SCENARIOS := default restore serve fallback topology link interrupt experiment
# on labs of their own: kernel on its QEMU guest, negative (imoln), cluster (imolc) and engine (imole) on embedded
# labs of theirs
MOLECULE_SCENARIOS := $(MOLECULE_LAB_SCENARIOS) kernel negative cluster engine
TEST_TIMES := .cache/test-times.tsv
# the logs of the scenarios that failed (.cache/molecule-<scenario>.log), for the excerpts at make test's end
FAILED_SCENARIO_LOGS := .cache/failed-scenario-logs
molecule: bootstrap
	trap 'INFERLAB_MOLECULE_SHARED_LAB= $(BIN)/molecule destroy -s default > .cache/molecule-lab-down.log 2>&1 || cat .cache/molecule-lab-down.log' EXIT
	INFERLAB_MOLECULE_SHARED_LAB= $(BIN)/molecule destroy -s default > .cache/molecule-lab-down.log 2>&1 || { cat .cache/molecule-lab-down.log; exit 1; }
	export INFERLAB_MOLECULE_SHARED_LAB=1
	strategy_env=$$($(BIN)/python -m inferlab.run.strategy)  # what `inferlab run` uses ($$INFERLAB_STRATEGY or mitogen)
	export $$strategy_env
	for scenario in $(MOLECULE_SCENARIOS); do
	  if [ $$scenario = engine ] || [ $$scenario = cluster ]; then
	    # one build per cache at a time (flock): this waits for make test's background build, then finds it cached;
	    # its own build-info file, so that the two never write one file
	    $(MAKE) --no-print-directory engine ENGINE_INFO=.cache/engine-molecule.json > .cache/molecule-engine-build.log 2>&1 \
	      || { cat .cache/molecule-engine-build.log; exit 1; }
	    export INFERLAB_ENGINE_INFO=$(CURDIR)/.cache/engine-molecule.json
	  fi
	  bash tests/molecule_scenario.sh $$scenario $(TEST_TIMES) $(FAILED_SCENARIO_LOGS)
	done

# The scenarios on labs of their own, each alone, beside the shared lab's scenarios (`make test` runs them in the
# background): kernel on its QEMU guest, negative on its own two-host lab (molecule/negative/inventory/hosts.yml, lab
# imoln), cluster on its own four-host lab (molecule/cluster/inventory/hosts.yml, lab imolc), whose leave-one-out
# serves the real engine, and engine on its own two-host lab (molecule/engine/inventory/hosts.yml, lab imole). The
# two that serve the real engine wait for its build (one build per cache at a time: flock), each with its own
# build-info file, so that the two never write one file.
molecule-kernel molecule-negative molecule-cluster molecule-engine: bootstrap
	if [ $@ = molecule-cluster ] || [ $@ = molecule-engine ]; then
	  $(MAKE) --no-print-directory engine ENGINE_INFO=.cache/engine-$(@:molecule-%=%).json \
	    > .cache/$@-engine-build.log 2>&1 || { cat .cache/$@-engine-build.log; exit 1; }
	  export INFERLAB_ENGINE_INFO=$(CURDIR)/.cache/engine-$(@:molecule-%=%).json
	fi
	strategy_env=$$($(BIN)/python -m inferlab.run.strategy)
	export $$strategy_env
	bash tests/molecule_scenario.sh $(@:molecule-%=%) $(TEST_TIMES) $(FAILED_SCENARIO_LOGS)

# The kernel scenario's downloads (Debian's kernel sources and headers, its image) and its guest (debootstrap, the
# initramfs), cached in .cache/kernel; the scenario's create finds them there. Mostly network and disk.
KERNEL_CACHE := .cache/kernel
kernel-cache: deb
	mkdir -p $(KERNEL_CACHE)
	bash tests/kernel/fetch_sources.sh $(KERNEL_CACHE) > /dev/null
	bash tests/kernel/build_guest.sh $(KERNEL_CACHE) > /dev/null

# Every gate, each timed (tests/gate.sh); the table of durations is printed at the end, passed or not. After bootstrap,
# three chains run in the background (tests/background_gates.sh: the lowest CPU priority, the idle I/O class), their
# output in .cache/gate-<gate>.log:
# - the checks: the unit tests and what only reads the code (install first: molecule `default`'s verifier uses its
#   venv), in make's session at renice 19 (their timing bounds failed when their autogroup got nice 19: the prober's
#   schedule, starved behind the lab's daemons);
# - the kernel chain: the kernel guest's downloads (kernel-cache), then, once the checks are done, the kernel scenario
#   (QEMU and gcc) and the real engine's scenario on its own lab (molecule-engine);
# - the engine chain: the engine's build (gcc on both CPUs when they are idle, nothing once cached) and its tests,
#   then, once the checks are done, the negative scenario (it only refuses) and the cluster scenario. Run beside the
#   checks, negative took 951 s instead of about 240 (its lab's daemons run at normal priority, its Ansible at the
#   lowest) and the foreground's scenarios took longer.
# The background chains run in sessions of their own whose autogroups have nice 19 (out of the lab daemons' way too;
# the labs' sshd, iperf3, probers and engine processes run in sessions of their own, so their measurements do not).
# The scenarios on the shared embedded lab run in the foreground. They leave a CPU idle for much of their time (they
# wait on requests, restarts and measurements), which the background chains take. The unit tests mostly wait on the
# processes and servers they start, and bound ratios or generous ceilings, never tight wall times.
TEST_BACKGROUND_GATES := install unit lint contract sanity
TEST_KERNEL_GATES := kernel-cache molecule-kernel molecule-engine
TEST_ENGINE_GATES := engine engine-test molecule-negative molecule-cluster
test:
	mkdir -p .cache && rm -f $(TEST_TIMES) $(FAILED_SCENARIO_LOGS)
	test_start=$$(date +%s)
	status=0
	background_failed() {  # print the log of each background gate that failed; fail if one did
	  local name failed=0
	  for name in "$$@"; do
	    awk -F'\t' -v name="$$name" '$$1 == name && $$3 == "passed" { ok = 1 } END { exit !ok }' $(TEST_TIMES) && continue
	    echo "$$name failed (.cache/gate-$$name.log):"; tail -n 60 .cache/gate-$$name.log 2> /dev/null || echo "(it did not run)"
	    failed=1
	  done
	  return $$failed
	}
	bash tests/gate.sh bootstrap $(TEST_TIMES) || status=1
	kernel= checks= engine=
	if [ $$status = 0 ]; then
	  bash tests/background_gates.sh $(TEST_TIMES) $(TEST_BACKGROUND_GATES) & checks=$$!
	  setsid -w bash tests/background_gates.sh $(TEST_TIMES) kernel-cache --after $$checks molecule-kernel \
	    molecule-engine & kernel=$$!
	  setsid -w bash tests/background_gates.sh $(TEST_TIMES) engine engine-test --after $$checks molecule-negative \
	    molecule-cluster & engine=$$!
	  trap 'wait $$kernel $$checks $$engine 2> /dev/null || true' EXIT  # never leave them running
	fi
	if [ $$status = 0 ]; then
	  bash tests/gate.sh molecule $(TEST_TIMES) MOLECULE_SCENARIOS="$(MOLECULE_LAB_SCENARIOS)" || status=1
	fi
	if [ -n "$$checks" ]; then wait $$checks || true; background_failed $(TEST_BACKGROUND_GATES) || status=1; fi
	if [ -n "$$kernel" ]; then wait $$kernel || true; background_failed $(TEST_KERNEL_GATES) || status=1; fi
	if [ -n "$$engine" ]; then wait $$engine || true; background_failed $(TEST_ENGINE_GATES) || status=1; fi
	bash tests/gate_times.sh $(TEST_TIMES) $$(( $$(date +%s) - test_start )) "$(TEST_BACKGROUND_GATES) $(TEST_KERNEL_GATES) $(TEST_ENGINE_GATES)"
	if [ -s $(FAILED_SCENARIO_LOGS) ]; then
	  while read -r log; do bash tests/failure_excerpt.sh "$$log"; done < $(FAILED_SCENARIO_LOGS)
	fi
	exit $$status

bench: bootstrap engine
	$(PY) tests/bench/bench_lab.py goals --runs 3 --json .cache/bench-goals.json
	$(PY) tests/bench/bench_lab.py lab --json .cache/bench-lab.json
	$(PY) tests/bench/bench_lab.py sampler --runs 3 --json .cache/bench-sampler.json
	$(PY) tests/bench/bench_lab.py serve --runs 5 --json .cache/bench-serve.json
	$(PY) tests/bench/bench_workload.py --runs 5 --json .cache/bench-workload.json
	$(PY) tests/bench/bench_report.py --runs 5 --json .cache/bench-report.json
	$(PY) tests/bench/bench_lab.py interrupt --runs 1 --json .cache/bench-interrupt.json
	$(PY) tests/bench/bench_engine.py --runs 5 --json .cache/bench-engine.json

clean:
	rm -rf .cache .collections tests/output
