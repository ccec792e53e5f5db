# tide: common tasks. `make run` serves the default model; `make test` builds and runs every test.
# Each target does only what is missing, so a second run is quick.
#
#   make run [HOST=127.0.0.1] [PORT=8000]   build the tide binary only, create models/ if absent, start `tide serve`
#   make test                               build, create models/, run every CTest test; report skips and why
#   make fuzz [FUZZ_SECONDS=60]             clang + ASan/UBSan build in build-fuzz, run each fuzz target
#   make fuzz-smoke [FUZZ_SMOKE_SECONDS=10]  the same, a short run per target (CI: .ci/run)
#   make bench                              the quick benchmarks (BENCH_QUICK, each about 2 min or less), then lists the long ones
#   make bench-all                          every bench/*/run.sh, quick and long (BENCH_LONG: 3 to 20+ min each; about an hour)
#   make bench-NAME                         one benchmark, bench/NAME/run.sh (e.g. make bench-batching)
#   make bench-list                         the quick and the long benchmarks
#   make bench-models [BENCH_MODELS=DIR]    export bge-reranker-base (XLM-R, seeded random weights) FP32 + INT8
#                                           into DIR (default build/bench-models) for bench/run_all --model
#                                           (not part of `make models`: 1.1 GB + 0.3 GB, minutes)
#   make models | build | bootstrap | clean | help
#
# Deployment (outside make test and CI; each installs its host tools with scripts/deploy/install-tools.sh):
#   make image [BUILD_FROM=host|source] [MODELS_IN_IMAGE=mount|baked]   OCI image localhost/tide:latest (podman)
#   make image-test                         build, run, serve a rerank request, stop within the grace period (~1-2 min)
#   make deploy-check                       render deploy/ (kustomize, Helm if available), validate every object, podman kube play
#   make replicas-test [REPLICAS_SMOKE=1]   N replicas behind haproxy: kill -9, rolling restart, saturation, warm-up (minutes)

SHELL         := /bin/bash
BUILD_DIR     ?= build
FUZZ_DIR      ?= build-fuzz
BUILD_TYPE    ?= Release
HOST          ?= 127.0.0.1
PORT          ?= 8000
FUZZ_SECONDS  ?= 60
FUZZ_SMOKE_SECONDS ?= 10
MODELS        ?= $(or $(TIDE_MODEL_REPOSITORY),models)
CTEST_JOBS    ?= 2
CMAKE_FLAGS   ?=
TIDE_BINARY   ?= $(BUILD_DIR)/tide
BENCH_MODELS  ?= $(BUILD_DIR)/bench-models
BENCH_PRESETS ?= bge-reranker-base
# Every bench/*/run.sh is in one of these lists (make bench refuses an unlisted one). The time is
# what its defaults take on the 2-core development machine, read from each script's settings.
#   quick: compat (~40 gzip/plain bodies), fusion (5 rounds x 2, ~45 s), rollout_window (seconds),
#          server_overhead (18 single-client requests), tls (2 x 3 rounds of 5 s), tokenizer (~12 s)
#   long:  batching (4 layouts x 60 s + warm-ups + raw engine, ~7 min), first_answer (a fresh clone's
#          `make run` without ccache, ~11 min), light_load (Node peer, ~20 min;
#          --short ~6 min), protocol_overhead (65 rounds x 5 formats + 6 x 12 s loops, ~4 min),
#          quantize (8-10 min), replicas (make replicas-test, minutes), rollout (5 phases x 20 s +
#          3 model versions loading, ~3 min), score_cache (2 x 60 s + starts, ~3 min), embed (an
#          all-MiniLM-L6-v2-shaped export + 4 x 20 s, ~3 min)
BENCH_QUICK   ?= compat fusion rollout_window server_overhead tls tokenizer
BENCH_LONG    ?= batching embed first_answer light_load protocol_overhead quantize replicas rollout score_cache tracing_cost

.PHONY: all help bootstrap configure build build-serve models models-serve bench-models run test fuzz fuzz-smoke bench bench-all bench-list clean image image-test deploy-check replicas-test

all: build

help:
	@sed -n '1,/^$$/p' Makefile | sed -E 's/^# ?//'

bootstrap:
	@scripts/bootstrap.sh

configure: bootstrap
	@if [ ! -f $(BUILD_DIR)/build.ninja ]; then \
	  cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS); \
	fi

# Everything: the server, every test and benchmark.
build: configure
	@cmake --build $(BUILD_DIR)

# Only what serving needs (the tide binary, which also verifies exported models): `make run`.
build-serve: configure
	@cmake --build $(BUILD_DIR) --target tide

models: build
	@TIDE_MODEL_REPOSITORY=$(MODELS) TIDE_BINARY=$(TIDE_BINARY) scripts/ensure_models.sh

models-serve: build-serve
	@TIDE_MODEL_REPOSITORY=$(MODELS) TIDE_BINARY=$(TIDE_BINARY) scripts/ensure_models.sh

# Each preset P becomes $(BENCH_MODELS)/P and P-int8 (tools/export_model.py --int8: verified against
# PyTorch, then tide quantize --int8); an entry already there is kept (delete it to re-export).
bench-models: build
	@for p in $(BENCH_PRESETS); do \
	  if [ -f "$(BENCH_MODELS)/$$p/1/model.onnx" ] && [ -f "$(BENCH_MODELS)/$$p-int8/1/model.onnx" ]; then \
	    echo "bench-models: $(BENCH_MODELS)/$$p and $$p-int8 present"; continue; fi; \
	  /usr/bin/python3 tools/export_model.py --preset $$p --repository "$(BENCH_MODELS)" --int8 \
	    --tide-binary "$(TIDE_BINARY)" || exit $$?; \
	done

run: models-serve
	@echo "tide: serving $(MODELS)/ on http://$(HOST):$(PORT) (the default model has random weights: its scores mean nothing)"
	@echo "try:  curl -s http://$(HOST):$(PORT)/rerank -H 'Content-Type: application/json' \\"
	@echo "        -d '{\"query\": \"what is a panda?\", \"texts\": [\"The giant panda is a bear.\", \"Paris is in France.\"]}'"
	@exec $(BUILD_DIR)/tide serve --model-repository $(MODELS) --host $(HOST) --port $(PORT)

# Prints the skipped tests, and the GoogleTest cases skipped inside black-box binaries that passed
# as a whole (ctest keeps up to 4 MB of a passed test's output for that, not its default 1 KB),
# grouped by reason, then one line: passed, failed, skipped, time. A tier alone:
# ctest --test-dir $(BUILD_DIR) -L unit|blackbox|parity|tools (make test runs them all).
test: models
	@start=$$(date +%s); rm -f $(BUILD_DIR)/last-test.xml; \
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j$(CTEST_JOBS) --test-output-size-passed 4194304 \
	  --output-junit $(abspath $(BUILD_DIR))/last-test.xml 2>&1 | tee $(BUILD_DIR)/last-test.log; \
	rc=$${PIPESTATUS[0]}; \
	/usr/bin/python3 tests/support/test_summary.py --junit $(BUILD_DIR)/last-test.xml \
	  --seconds $$(( $$(date +%s) - start )); summary_rc=$$?; \
	if [ $$rc -ne 0 ]; then echo "make test: ctest exited $$rc; log in $(BUILD_DIR)/last-test.log"; exit $$rc; fi; \
	exit $$summary_rc

fuzz: bootstrap
	@FUZZ_DIR=$(FUZZ_DIR) tools/run_fuzz.sh $(FUZZ_SECONDS)

fuzz-smoke: bootstrap
	@FUZZ_DIR=$(FUZZ_DIR) tools/run_fuzz.sh $(FUZZ_SMOKE_SECONDS)

# Runs bench/NAME/run.sh for each NAME in $(1), stopping at the first that fails.
bench_run = for name in $(1); do \
	  echo "== bench/$$name/run.sh"; BUILD_DIR=$(BUILD_DIR) TIDE_BINARY=$(TIDE_BINARY) MODELS=$(MODELS) \
	    MODEL_REPOSITORY=$(MODELS) TIDE_MODEL_REPOSITORY=$(MODELS) bash "bench/$$name/run.sh" || exit $$?; \
	done

bench-list:
	@echo "quick (make bench):    $(BENCH_QUICK)"
	@echo "long (make bench-NAME, or all with make bench-all): $(BENCH_LONG)"
	@for script in bench/*/run.sh; do name=$$(basename $$(dirname $$script)); \
	  case " $(BENCH_QUICK) $(BENCH_LONG) " in *" $$name "*) ;; \
	  *) echo "make bench: bench/$$name/run.sh is in neither BENCH_QUICK nor BENCH_LONG (Makefile)"; exit 1;; esac; \
	done

bench: bench-list models
	@$(call bench_run,$(BENCH_QUICK))
	@echo "make bench: the quick benchmarks ran; the long ones: $(BENCH_LONG) (make bench-NAME, or make bench-all)"

bench-all: bench-list models
	@$(call bench_run,$(BENCH_QUICK) $(BENCH_LONG))

bench-%: models
	@[ -f bench/$*/run.sh ] || { echo "make bench-$*: no bench/$*/run.sh (make bench-list)"; exit 1; }
	@$(call bench_run,$*)

BUILD_FROM      ?= host
MODELS_IN_IMAGE ?= mount

image: models
	@BUILD_FROM=$(BUILD_FROM) IMAGE_MODELS=$(MODELS_IN_IMAGE) MODEL_REPOSITORY=$(MODELS) TIDE_BINARY=$(TIDE_BINARY) scripts/deploy/image.sh

image-test: models
	@MODEL_REPOSITORY=$(MODELS) TIDE_BINARY=$(TIDE_BINARY) scripts/deploy/image-test.sh

deploy-check:
	@MODEL_REPOSITORY=$(MODELS) TIDE_BINARY=$(TIDE_BINARY) scripts/deploy/deploy-check.sh

replicas-test: models
	@MODEL_REPOSITORY=$(MODELS) TIDE_BINARY=$(TIDE_BINARY) SMOKE=$(REPLICAS_SMOKE) bench/replicas/run.sh

clean:
	rm -rf $(BUILD_DIR) $(FUZZ_DIR)
